//! The Dockerfile: a locked release build, a distroless runtime, a non-root user and the
//! OCI labels, the licence and source being the workspace's.

use std::path::Path;

/// The file `rel` of the repository; empty (and so failing every check) when unreadable.
fn read(rel: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(rel);
    let text = std::fs::read_to_string(&path);
    assert!(text.is_ok(), "{}: {text:?}", path.display());
    text.unwrap_or_default()
}

/// The instructions of the last stage (from its FROM on).
fn runtime_stage(dockerfile: &str) -> &str {
    let at = dockerfile.rfind("\nFROM ").unwrap_or(0);
    &dockerfile[at..]
}

#[test]
fn the_build_is_locked_and_the_runtime_is_distroless_and_non_root() {
    let d = read("Dockerfile");
    assert!(
        d.contains("cargo build --release --locked"),
        "the build must use Cargo.lock as it is"
    );
    let runtime = runtime_stage(&d);
    let from = runtime.lines().nth(1).unwrap_or_default();
    assert!(from.starts_with("FROM gcr.io/distroless/"), "{from}");
    let user = runtime
        .lines()
        .find_map(|l| l.strip_prefix("USER "))
        .unwrap_or_default();
    let uid: u32 = user
        .split(':')
        .next()
        .unwrap_or_default()
        .parse()
        .unwrap_or(0);
    assert!(uid > 0, "a numeric non-root USER, got {user:?}");
    // The chart's pod security context runs the same user.
    assert!(read("charts/kerf-agent/values.yaml").contains(&format!("runAsUser: {uid}")));
}

#[test]
fn the_image_carries_oci_labels_of_the_workspace() {
    let runtime = read("Dockerfile");
    let runtime = runtime_stage(&runtime);
    let cargo = read("Cargo.toml");
    let field = |k: &str| {
        cargo
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{k} = ")))
            .map(|v| v.trim_matches('"').to_owned())
            .unwrap_or_default()
    };
    for (label, want) in [
        ("title", "kerf-agent".to_owned()),
        ("version", "${VERSION}".to_owned()),
        ("revision", "${REVISION}".to_owned()),
        ("source", field("repository")),
        ("licenses", field("license")),
    ] {
        let line = format!("org.opencontainers.image.{label}=\"{want}\"");
        assert!(runtime.contains(&line), "missing {line}");
    }
}

#[test]
fn the_builder_copies_every_workspace_member() {
    let d = read("Dockerfile");
    let copied: Vec<&str> = d
        .lines()
        .filter_map(|l| l.strip_prefix("COPY "))
        .filter(|l| !l.starts_with("--from"))
        .flat_map(|l| l.split_whitespace())
        .collect();
    let cargo = read("Cargo.toml");
    let members = cargo
        .lines()
        .skip_while(|l| !l.starts_with("members"))
        .take_while(|l| !l.starts_with(']'))
        .filter_map(|l| l.trim().strip_prefix('"')?.split('"').next());
    for member in members {
        let top = member.split('/').next().unwrap_or_default();
        assert!(
            copied.contains(&top),
            "the builder stage does not COPY {top} (workspace member {member})"
        );
    }
}

#[test]
fn the_rust_version_is_the_workspaces() {
    let d = read("Dockerfile");
    let image = d
        .lines()
        .find_map(|l| l.strip_prefix("ARG RUST_VERSION="))
        .unwrap_or_default();
    let cargo = read("Cargo.toml");
    let msrv = cargo
        .lines()
        .find_map(|l| l.strip_prefix("rust-version = "))
        .unwrap_or_default()
        .trim_matches('"');
    assert!(!msrv.is_empty(), "no rust-version in Cargo.toml");
    assert_eq!(
        image, msrv,
        "the Dockerfile builds with another Rust than rust-version"
    );
}

/// The settings of the agent's jemalloc are built into it from `.cargo/config.toml`
/// (`kerf_agent::runtime::allocator_settings`): the builder stage must copy that file, and
/// the image sets no glibc allocator tunables, which the agent's allocator would not read.
#[test]
fn the_image_builds_the_agent_with_its_allocator_settings() {
    let d = read("Dockerfile");
    assert!(
        d.lines().any(|l| l == "COPY .cargo ./.cargo"),
        "the builder stage does not copy .cargo (the jemalloc settings)"
    );
    let config = read(".cargo/config.toml");
    assert!(
        config.contains("JEMALLOC_SYS_WITH_MALLOC_CONF = \""),
        ".cargo/config.toml sets no jemalloc settings"
    );
    assert!(
        !d.contains("GLIBC_TUNABLES"),
        "the Dockerfile sets GLIBC_TUNABLES"
    );
    assert!(
        !read("scripts/image-archive.sh").contains("GLIBC_TUNABLES"),
        "scripts/image-archive.sh sets GLIBC_TUNABLES"
    );
    // Both arm64 builds give jemalloc the 64 KiB page size.
    assert!(d.contains("linux/arm64 ]; then export JEMALLOC_SYS_WITH_LG_PAGE=16;"));
    assert!(
        read(".github/workflows/release.yml")
            .contains("= arm64 ]; then export JEMALLOC_SYS_WITH_LG_PAGE=16;")
    );
}
