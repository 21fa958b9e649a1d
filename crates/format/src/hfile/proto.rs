//! The protobuf messages of an HFile: the trailer and the file-info map (HBase `HFile.proto`,
//! field numbers from spec §6.4), hand-declared with `prost`.

/// HBase `FileTrailerProto`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct FileTrailerProto {
    #[prost(uint64, optional, tag = "1")]
    pub file_info_offset: Option<u64>,
    #[prost(uint64, optional, tag = "2")]
    pub load_on_open_data_offset: Option<u64>,
    #[prost(uint64, optional, tag = "3")]
    pub uncompressed_data_index_size: Option<u64>,
    #[prost(uint64, optional, tag = "4")]
    pub total_uncompressed_bytes: Option<u64>,
    #[prost(uint32, optional, tag = "5")]
    pub data_index_count: Option<u32>,
    #[prost(uint32, optional, tag = "6")]
    pub meta_index_count: Option<u32>,
    #[prost(uint64, optional, tag = "7")]
    pub entry_count: Option<u64>,
    #[prost(uint32, optional, tag = "8")]
    pub num_data_index_levels: Option<u32>,
    #[prost(uint64, optional, tag = "9")]
    pub first_data_block_offset: Option<u64>,
    #[prost(uint64, optional, tag = "10")]
    pub last_data_block_offset: Option<u64>,
    #[prost(string, optional, tag = "11")]
    pub comparator_class_name: Option<String>,
    #[prost(uint32, optional, tag = "12")]
    pub compression_codec: Option<u32>,
    #[prost(bytes = "vec", optional, tag = "13")]
    pub encryption_key: Option<Vec<u8>>,
}

/// HBase `BytesBytesPair`: one file-info entry.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct BytesBytesPair {
    #[prost(bytes = "vec", tag = "1")]
    pub first: Vec<u8>,
    #[prost(bytes = "vec", tag = "2")]
    pub second: Vec<u8>,
}

/// HBase `InfoProto`: the file-info map.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct InfoProto {
    #[prost(message, repeated, tag = "1")]
    pub map_entry: Vec<BytesBytesPair>,
}
