use super::*;
use arbor_timeline::config::TableType;

fn config(props: &[(&str, &str)]) -> TableConfig {
    let mut b =
        TableConfig::builder("t", TableType::CopyOnWrite).partition_fields(["region", "dt"]);
    for (k, v) in props {
        b = b.property(*k, *v);
    }
    b.build().unwrap()
}

fn days(n: u64) -> Retention {
    Retention::Duration(Duration::from_secs(n * 86_400))
}

#[test]
fn no_keys_no_policies() {
    let p = read(&config(&[])).unwrap();
    assert!(p.is_empty());
    assert!(!p.inline);
    assert_eq!(p.max_partitions, None);
}

#[test]
fn rfc_keys_are_read() {
    let c = config(&[
        (DEFAULT_POLICY, "KEEP_BY_TIME"),
        (DEFAULT_FIELDS, "region"),
        (DEFAULT_VALUE, "30"),
        (
            POLICIES,
            r#"[{"partitionSpec":"region=2/","policy":"KEEP_BY_SIZE","policyValue":107374182400},{"partitionSpec":"region=1/","policy":"KEEP_BY_COUNT","policyValue":10},{"partitionSpec":"region=3/","policy":"KEEP_BY_TIME","policyValue":"12h"}]"#,
        ),
        (INLINE, "true"),
        (MAX_DELETE_PARTITIONS, "5"),
    ]);
    let p = read(&c).unwrap();
    let d = p.default.clone().unwrap();
    assert_eq!(d.to_string(), "default (by region): time 30d");
    assert_eq!(d.retain, days(30));
    let shown: Vec<String> = p.explicit.iter().map(|e| e.to_string()).collect();
    assert_eq!(
        shown,
        vec![
            "region=2: size 100GiB",
            "region=1: count 10",
            "region=3: time 12h"
        ]
    );
    assert!(p.inline);
    assert_eq!(p.max_partitions, Some(5));
}

#[test]
fn written_policies_read_back_equal() {
    let p = read(&config(&[
        (DEFAULT_POLICY, "KEEP_BY_EVENT_TIME"),
        (DEFAULT_VALUE, "36h"),
        (DEFAULT_TIME_FIELD, "dt"),
        (DEFAULT_TIME_FORMAT, "yyyy-MM-dd"),
        (
            POLICIES,
            r#"[{"partitionSpec":"region=eu","policy":"KEEP_BY_SIZE","policyValue":1536}]"#,
        ),
    ]))
    .unwrap();
    let mut c = config(&[(JAVA_DAYS_RETAIN, "-1")]);
    write(&p, &mut c).unwrap();
    assert_eq!(c.get(JAVA_DAYS_RETAIN), None);
    assert_eq!(c.get(DEFAULT_VALUE), Some("36h"));
    let back = read(&c).unwrap();
    assert_eq!(back, p);
    // Through the properties text, as the file stores it.
    let reparsed = TableConfig::parse(c.render(chrono::Utc::now()).as_bytes(), "x").unwrap();
    assert_eq!(read(&reparsed).unwrap(), p);
}

#[test]
fn java_keys_mean_the_same() {
    let p = read(&config(&[(JAVA_DAYS_RETAIN, "7")])).unwrap();
    let d = p.default.unwrap();
    assert_eq!(d.strategy, TtlStrategy::Time);
    assert_eq!(d.retain, days(7));
    assert_eq!(d.scope, PolicyScope::Default { fields: vec![] });

    let p = read(&config(&[
        (JAVA_DAYS_RETAIN, "3"),
        (JAVA_STRATEGY_TYPE, "KEEP_BY_CREATION_TIME"),
        (
            JAVA_PARTITION_SELECTED,
            "region=eu/dt=2024-01-01,us/2024-01-02",
        ),
    ]))
    .unwrap();
    assert!(p.default.is_none());
    let shown: Vec<String> = p.explicit.iter().map(|e| e.to_string()).collect();
    assert_eq!(
        shown,
        vec![
            "region=eu/dt=2024-01-01: creation-time 3d",
            "region=us/dt=2024-01-02: creation-time 3d"
        ]
    );
    let class = read(&config(&[
        (JAVA_DAYS_RETAIN, "3"),
        (JAVA_STRATEGY_CLASS, JAVA_CREATION_CLASS),
    ]))
    .unwrap();
    assert_eq!(class.default.unwrap().strategy, TtlStrategy::CreationTime);
    assert!(read(&config(&[(JAVA_DAYS_RETAIN, "-1")]))
        .unwrap()
        .is_empty());
}

#[test]
fn contradicting_or_bad_keys_are_errors_naming_them() {
    let cases: Vec<(Vec<(&str, &str)>, &str)> = vec![
        (
            vec![
                (JAVA_DAYS_RETAIN, "7"),
                (DEFAULT_POLICY, "KEEP_BY_TIME"),
                (DEFAULT_VALUE, "8"),
            ],
            JAVA_DAYS_RETAIN,
        ),
        (
            vec![
                (JAVA_DAYS_RETAIN, "7"),
                (JAVA_STRATEGY_TYPE, "KEEP_BY_CREATION_TIME"),
                (JAVA_STRATEGY_CLASS, JAVA_TIME_CLASS),
            ],
            JAVA_STRATEGY_CLASS,
        ),
        (vec![(JAVA_DAYS_RETAIN, "x")], JAVA_DAYS_RETAIN),
        (
            vec![
                (JAVA_DAYS_RETAIN, "1"),
                (JAVA_STRATEGY_TYPE, "KEEP_BY_COUNT"),
            ],
            JAVA_STRATEGY_TYPE,
        ),
        (vec![(DEFAULT_VALUE, "3")], DEFAULT_VALUE),
        (vec![(DEFAULT_POLICY, "KEEP_BY_TIME")], DEFAULT_VALUE),
        (
            vec![
                (DEFAULT_POLICY, "KEEP_BY_COUNT"),
                (DEFAULT_VALUE, "3"),
                (DEFAULT_FIELDS, "region,dt"),
            ],
            DEFAULT_POLICY,
        ),
        (vec![(POLICIES, "{")], POLICIES),
        (
            vec![(
                POLICIES,
                r#"[{"partitionSpec":"city=x","policy":"KEEP_BY_TIME","policyValue":1}]"#,
            )],
            POLICIES,
        ),
        (
            vec![(
                POLICIES,
                r#"[{"partitionSpec":"region=x","policy":"KEEP_BY_TIME","policyValue":1},{"partitionSpec":"region=x/","policy":"KEEP_BY_TIME","policyValue":2}]"#,
            )],
            POLICIES,
        ),
        (vec![(MAX_DELETE_PARTITIONS, "0")], MAX_DELETE_PARTITIONS),
    ];
    for (props, key) in cases {
        let e = read(&config(&props)).unwrap_err().to_string();
        assert!(e.contains(key), "{props:?}: {e}");
    }
}
