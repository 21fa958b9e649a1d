//! Space-filling curves over ranked column values: the Z-order (bit interleaving) and Hilbert
//! indexes of points whose coordinates are [`BITS`]-bit ranks, as bytes that sort in curve
//! order.
//!
//! Each sort column's values are first mapped to ranks by boundaries taken from a sample of
//! the rows ([`super::sort_key`]), as Java's `sample` curve build method does: raw values
//! (Java's `direct` method maps each to its first 8 bytes) would let a column whose values
//! differ in high bits (strings, timestamps) decide the order alone.

/// Bits of each coordinate.
pub(crate) const BITS: u32 = 16;

/// The Z-order index of `point` (each coordinate below `2^BITS`): bits interleaved from the
/// most significant, coordinate 0 first, packed big-endian into `2 * point.len()` bytes.
pub(crate) fn z_order(point: &[u32]) -> Vec<u8> {
    interleave(point)
}

/// The Hilbert index of `point` (each coordinate below `2^BITS`), big-endian in
/// `2 * point.len()` bytes: consecutive indexes are cells at distance 1. One coordinate is its
/// own index. John Skilling's transpose algorithm ("Programming the Hilbert curve", 2004).
pub(crate) fn hilbert(point: &[u32]) -> Vec<u8> {
    let mut x: Vec<u32> = point.iter().map(|v| v & mask()).collect();
    if x.len() > 1 {
        let m = 1u32 << (BITS - 1);
        // Inverse undo excess work (coordinate 0 against itself: invert or nothing).
        let mut q = m;
        while q > 1 {
            let p = q - 1;
            if let Some((first, rest)) = x.split_first_mut() {
                if *first & q != 0 {
                    *first ^= p;
                }
                for xi in rest.iter_mut() {
                    if *xi & q != 0 {
                        *first ^= p;
                    } else {
                        let t = (*first ^ *xi) & p;
                        *first ^= t;
                        *xi ^= t;
                    }
                }
            }
            q >>= 1;
        }
        // Gray encode.
        let mut prev: Option<u32> = None;
        for v in x.iter_mut() {
            if let Some(pv) = prev {
                *v ^= pv;
            }
            prev = Some(*v);
        }
        let last = x.last().copied().unwrap_or(0);
        let mut t = 0;
        let mut q = m;
        while q > 1 {
            if last & q != 0 {
                t ^= q - 1;
            }
            q >>= 1;
        }
        for v in &mut x {
            *v ^= t;
        }
    }
    interleave(&x)
}

fn mask() -> u32 {
    (1u32 << BITS) - 1
}

/// Bits of `coords` interleaved from the most significant bit, coordinate 0 first.
fn interleave(coords: &[u32]) -> Vec<u8> {
    let total = coords.len() * BITS as usize;
    let mut out = vec![0u8; total.div_ceil(8)];
    let mut pos = 0usize;
    for bit in (0..BITS).rev() {
        for c in coords {
            if (c >> bit) & 1 == 1 {
                if let Some(b) = out.get_mut(pos / 8) {
                    *b |= 0x80 >> (pos % 8);
                }
            }
            pos += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cells(bits: u32) -> Vec<[u32; 2]> {
        let side = 1u32 << bits;
        (0..side)
            .flat_map(|x| (0..side).map(move |y| [x, y]))
            .collect()
    }

    /// Coordinates scaled so that only the top `bits` bits of each vary.
    fn scaled(c: [u32; 2], bits: u32) -> [u32; 2] {
        [c[0] << (BITS - bits), c[1] << (BITS - bits)]
    }

    #[test]
    fn test_hilbert_visits_neighbouring_cells_in_turn() {
        for bits in 1..=4 {
            let mut all = cells(bits);
            all.sort_by_key(|c| hilbert(&scaled(*c, bits)));
            for w in all.windows(2) {
                let d = w[0][0].abs_diff(w[1][0]) + w[0][1].abs_diff(w[1][1]);
                assert_eq!(d, 1, "{bits} bits: {:?} then {:?}", w[0], w[1]);
            }
            let distinct: std::collections::BTreeSet<Vec<u8>> =
                all.iter().map(|c| hilbert(&scaled(*c, bits))).collect();
            assert_eq!(distinct.len(), all.len());
        }
    }

    #[test]
    fn test_z_order_interleaves_from_the_top_bit() {
        assert_eq!(z_order(&[0x8000, 0]), vec![0x80, 0, 0, 0]);
        assert_eq!(z_order(&[0, 0x8000]), vec![0x40, 0, 0, 0]);
        assert_eq!(z_order(&[0xFFFF, 0]), vec![0xAA, 0xAA, 0xAA, 0xAA]);
        // Quadrants in Z order: (0,0) < (0,1) < (1,0) < (1,1) by the top bits.
        let mut q = [[1u32, 1], [0, 1], [1, 0], [0, 0]].map(|c| scaled(c, 1));
        q.sort_by_key(|c| z_order(c));
        assert_eq!(q, [[0, 0], [0, 1], [1, 0], [1, 1]].map(|c| scaled(c, 1)));
    }

    #[test]
    fn test_one_coordinate_is_its_own_index() {
        for v in [0u32, 1, 2, 0x1234, 0xFFFF] {
            assert_eq!(hilbert(&[v]), (v as u16).to_be_bytes().to_vec());
            assert_eq!(z_order(&[v]), (v as u16).to_be_bytes().to_vec());
        }
    }
}
