//! Quantity parsing and formatting: every Kubernetes form, rounding up, and rejection of
//! everything else with the value in the message (design §5).

use kerf_api::{Quantity, Resource};
use kerf_decide::quantity::{QuantityError, format, parse, parse_quantity};

const CPU: Resource = Resource::Cpu;
const MEM: Resource = Resource::Memory;

// design §5: parsing accepts every Kubernetes quantity form
#[test]
fn cpu_accepts_every_decimal_suffix() {
    let cases = [
        ("250m", 250),
        ("2", 2000),
        ("0", 0),
        ("0.5", 500),
        (".5", 500),
        ("5.", 5000),
        ("1500000u", 1500),
        ("2000000000n", 2000),
        ("1k", 1_000_000),
        ("1M", 1_000_000_000),
        ("1G", 1_000_000_000_000),
        ("1T", 1_000_000_000_000_000),
        ("1P", 1_000_000_000_000_000_000),
        ("1e3", 1_000_000),
        ("1E3", 1_000_000),
        ("1e+3", 1_000_000),
        ("1E-3", 1),
        ("25e-2", 250),
        ("+1", 1000),
        ("-1", -1000),
        ("-250m", -250),
        ("1Ki", 1_024_000),
    ];
    for (text, millis) in cases {
        assert_eq!(parse_quantity(CPU, text), Ok(millis), "{text}");
    }
}

// design §5: parsing accepts every Kubernetes quantity form
#[test]
fn memory_accepts_every_binary_and_decimal_suffix() {
    let cases: [(&str, i64); 20] = [
        ("1", 1),
        ("1k", 1000),
        ("1M", 1_000_000),
        ("1G", 1_000_000_000),
        ("1T", 1_000_000_000_000),
        ("1P", 1_000_000_000_000_000),
        ("1E", 1_000_000_000_000_000_000),
        ("1Ki", 1 << 10),
        ("1Mi", 1 << 20),
        ("1Gi", 1 << 30),
        ("1Ti", 1 << 40),
        ("1Pi", 1 << 50),
        ("1Ei", 1 << 60),
        ("1.5Gi", 3 << 29),
        ("0.5Mi", 1 << 19),
        ("512Mi", 512 << 20),
        ("1e9", 1_000_000_000),
        ("129e6", 129_000_000),
        ("1000m", 1),
        ("-2Ki", -2048),
    ];
    for (text, bytes) in cases {
        assert_eq!(parse_quantity(MEM, text), Ok(bytes), "{text}");
    }
}

// design §5: values round up to a whole millicore or byte, as Kubernetes does
#[test]
fn fractions_round_up_to_a_whole_unit() {
    assert_eq!(parse_quantity(CPU, "0.1m"), Ok(1));
    assert_eq!(parse_quantity(CPU, "1n"), Ok(1));
    assert_eq!(parse_quantity(CPU, "1001u"), Ok(2));
    assert_eq!(parse_quantity(CPU, "0.0001"), Ok(1));
    assert_eq!(parse_quantity(CPU, "1e-30"), Ok(1));
    assert_eq!(parse_quantity(CPU, "1e-999"), Ok(1));
    assert_eq!(parse_quantity(MEM, "0.5"), Ok(1));
    assert_eq!(parse_quantity(MEM, "1m"), Ok(1));
    assert_eq!(parse_quantity(MEM, "1.0001Ki"), Ok(1025));
    // Kubernetes rounds away from zero.
    assert_eq!(parse_quantity(CPU, "-0.1m"), Ok(-1));
    // Exact values stay exact.
    assert_eq!(parse_quantity(MEM, "0.000e5"), Ok(0));
    assert_eq!(parse_quantity(CPU, "1.000m"), Ok(1));
}

// design §5: quantities reach the limits of i64 exactly, and no further
#[test]
fn values_up_to_i64_max_are_exact_and_larger_ones_rejected() {
    assert_eq!(parse_quantity(MEM, "9223372036854775807"), Ok(i64::MAX));
    assert_eq!(parse_quantity(MEM, "-8Ei"), Ok(i64::MIN));
    assert_eq!(parse_quantity(CPU, "9223372036854775807m"), Ok(i64::MAX));
    for (resource, text) in [
        (MEM, "9223372036854775808"),
        (MEM, "8Ei"),
        (MEM, "10E"),
        (CPU, "9223372036854776"),
        (CPU, "9223372036854775808m"),
        (MEM, "1e19"),
        (MEM, "1e1000000000"),
        (MEM, "999999999999999999999999999999999999999999"),
    ] {
        let err = parse_quantity(resource, text).unwrap_err();
        assert!(err.to_string().contains(&format!("{text:?}")), "{err}");
        assert!(parse_quantity(resource, text).is_err(), "{text}");
    }
}

// design §5: bad quantities are rejected with an error that names the value
#[test]
fn bad_quantities_are_rejected_naming_the_value() {
    let cases = [
        ("12Q", r#"invalid quantity "12Q": unknown suffix "Q""#),
        (
            "1.2.3",
            r#"invalid quantity "1.2.3": more than one decimal point"#,
        ),
        ("", r#"invalid quantity "": empty"#),
        ("Mi", r#"invalid quantity "Mi": no digits"#),
        ("1iM", r#"invalid quantity "1iM": unknown suffix "iM""#),
    ];
    for (text, message) in cases {
        let err = parse_quantity(MEM, text).unwrap_err();
        assert_eq!(err.to_string(), message);
        assert_eq!(err.category(), "InvalidQuantity");
    }
    for text in [
        "1K", "1 Gi", " 1", "1Gi ", "1mi", "1e", "1e3.5", "1ee3", "+", "-", ".", "+-1", "1KiB",
        "1E3i", "0x10", "1,5", "1e-", "--1", "∞",
    ] {
        let err = parse_quantity(CPU, text).unwrap_err();
        let QuantityError::Invalid { value, .. } = &err;
        assert_eq!(value, text);
        assert!(err.to_string().contains(&format!("{text:?}")), "{err}");
    }
}

// design §5: parse takes the kerf-api Quantity as written
#[test]
fn parse_reads_a_kerf_api_quantity() {
    assert_eq!(parse(CPU, &Quantity::from("250m")), Ok(250));
    assert_eq!(parse(MEM, &Quantity::from("1Gi")), Ok(1 << 30));
}

// design §5: canonical form of values the agent writes
#[test]
fn format_is_canonical() {
    let cpu = [
        (250, "250m"),
        (2000, "2"),
        (0, "0"),
        (1500, "1500m"),
        (1, "1m"),
        (-500, "-500m"),
    ];
    for (value, text) in cpu {
        assert_eq!(format(CPU, value), Quantity::from(text));
    }
    let mem = [
        (512 << 20, "512Mi"),
        (1 << 30, "1Gi"),
        (3 << 29, "1536Mi"),
        (1000, "1000"),
        (1024, "1Ki"),
        (0, "0"),
        (1 << 60, "1Ei"),
        (i64::MIN, "-8Ei"),
        (i64::MAX, "9223372036854775807"),
        (-(1 << 20), "-1Mi"),
    ];
    for (value, text) in mem {
        assert_eq!(format(MEM, value), Quantity::from(text));
    }
}
