//! JVM and Python detection (design D7; EV-34, EV-35, EV-36).
//!
//! The hub's container flags come first: `jvm-fixed-heap` always marks a fixed heap (and a
//! JVM); with `jvm` or `python` set, they say what the container runs. Without either, a
//! heuristic reads the pod template only:
//! - a JVM: a command or args token whose file name is `java`, or that is `-jar` or starts
//!   with `-Xmx`, `-Xms`, `-XX:` or `-javaagent`; an image whose name (last path segment,
//!   without tag or digest) contains `java`, `jdk`, `jre`, `temurin`, `corretto`, `zulu`,
//!   `graalvm`, `liberica`, `semeru`, `tomcat`, `jetty` or `wildfly`; or a non-empty
//!   literal value of `JAVA_TOOL_OPTIONS`, `JDK_JAVA_OPTIONS` or `JAVA_OPTS`;
//! - Python: a command or args token whose file name starts with `python` or `pypy`, or is
//!   `gunicorn`, `uvicorn` or `celery`; an image name that starts with `python` or `pypy`.
//!
//! A fixed heap (flag or not) is `-Xmx` or `-XX:MaxHeapSize` in the command, the args, or
//! the literal values of those three variables. Only literal `env` values are read, never
//! `valueFrom` or `envFrom`: the caller passes literal values only.

use kerf_api::rsr::ContainerFlag;

/// The parts of a pod template container the heuristic reads.
pub trait TemplateContainer {
    /// The image reference.
    fn image(&self) -> &str;
    /// The command.
    fn command(&self) -> &[String];
    /// The args.
    fn args(&self) -> &[String];
    /// Environment variables with a literal value.
    fn env(&self) -> &[(String, String)];
}

/// A pod template container, as the heuristic reads it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ContainerView {
    /// The image reference.
    pub image: String,
    /// The command.
    pub command: Vec<String>,
    /// The args.
    pub args: Vec<String>,
    /// Environment variables with a literal value.
    pub env: Vec<(String, String)>,
}

/// Implements [`TemplateContainer`] for a struct with the fields of [`ContainerView`]
/// (`image`, `command`, `args`, `env`).
macro_rules! template_container {
    ($container:ty) => {
        impl $crate::jvm::TemplateContainer for $container {
            fn image(&self) -> &str {
                &self.image
            }
            fn command(&self) -> &[String] {
                &self.command
            }
            fn args(&self) -> &[String] {
                &self.args
            }
            fn env(&self) -> &[(String, String)] {
                &self.env
            }
        }
    };
}

pub(crate) use template_container;

template_container!(ContainerView);

/// What a container runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Runtime {
    /// A JVM.
    pub jvm: bool,
    /// A Python interpreter.
    pub python: bool,
    /// A JVM whose maximum heap is fixed.
    pub fixed_heap: bool,
}

impl Runtime {
    /// Whether memory needs `resizePolicy: RestartContainer` under in-place (EV-34).
    pub fn needs_restart_for_memory(&self) -> bool {
        self.jvm || self.python
    }
}

/// Environment variables whose literal values carry JVM options.
pub const JVM_OPTION_VARS: [&str; 3] = ["JAVA_TOOL_OPTIONS", "JDK_JAVA_OPTIONS", "JAVA_OPTS"];

const JVM_IMAGE_WORDS: [&str; 12] = [
    "java", "jdk", "jre", "temurin", "corretto", "zulu", "graalvm", "liberica", "semeru", "tomcat",
    "jetty", "wildfly",
];

const PYTHON_PROGRAMS: [&str; 3] = ["gunicorn", "uvicorn", "celery"];

/// What `container` runs, from the hub's `flags` and, without `jvm` or `python` among
/// them, the heuristic.
pub fn detect(flags: &[ContainerFlag], container: &(impl TemplateContainer + ?Sized)) -> Runtime {
    let flag_fixed = flags.contains(&ContainerFlag::JvmFixedHeap);
    let flag_jvm = flags.contains(&ContainerFlag::Jvm);
    let flag_python = flags.contains(&ContainerFlag::Python);
    let fixed_heap = flag_fixed || fixed_heap(container);
    if flag_jvm || flag_python {
        return Runtime {
            jvm: flag_jvm || flag_fixed,
            python: flag_python,
            fixed_heap,
        };
    }
    Runtime {
        jvm: fixed_heap || looks_like_jvm(container),
        python: looks_like_python(container),
        fixed_heap,
    }
}

/// Whether the template fixes the JVM's maximum heap (`-Xmx`, `-XX:MaxHeapSize`).
pub fn fixed_heap(container: &(impl TemplateContainer + ?Sized)) -> bool {
    tokens(container).any(|t| t.starts_with("-Xmx") || t.starts_with("-XX:MaxHeapSize"))
}

/// Whether the heuristic sees a JVM or Python (no hub flags).
pub fn jvm_or_python(container: &(impl TemplateContainer + ?Sized)) -> bool {
    fixed_heap(container) || looks_like_jvm(container) || looks_like_python(container)
}

/// Every command and args token, and every whitespace-separated word of the JVM option
/// variables' literal values.
fn tokens<C: TemplateContainer + ?Sized>(c: &C) -> impl Iterator<Item = &str> {
    let env = c
        .env()
        .iter()
        .filter(|(k, _)| JVM_OPTION_VARS.contains(&k.as_str()))
        .flat_map(|(_, v)| v.split_whitespace());
    argv(c).chain(env)
}

/// Every whitespace-separated word of the command and the args.
fn argv<C: TemplateContainer + ?Sized>(c: &C) -> impl Iterator<Item = &str> {
    c.command()
        .iter()
        .chain(c.args())
        .flat_map(|s| s.split_whitespace())
}

/// The file name of a path (`/usr/bin/java` -> `java`).
fn file_name(token: &str) -> &str {
    token.rsplit('/').next().unwrap_or(token)
}

/// The image's name: last path segment without tag or digest (compared ignoring ASCII
/// case).
fn image_name(image: &str) -> &str {
    let no_digest = image.split('@').next().unwrap_or(image);
    let last = no_digest.rsplit('/').next().unwrap_or(no_digest);
    last.split(':').next().unwrap_or(last)
}

/// Whether `name` contains `word` (lower case ASCII), ignoring ASCII case.
fn contains_word(name: &str, word: &str) -> bool {
    name.as_bytes()
        .windows(word.len())
        .any(|w| w.eq_ignore_ascii_case(word.as_bytes()))
}

/// Whether `name` starts with `word` (lower case ASCII), ignoring ASCII case.
fn starts_with_word(name: &str, word: &str) -> bool {
    name.as_bytes()
        .get(..word.len())
        .is_some_and(|w| w.eq_ignore_ascii_case(word.as_bytes()))
}

fn looks_like_jvm<C: TemplateContainer + ?Sized>(c: &C) -> bool {
    let by_argv = argv(c).any(|t| {
        file_name(t) == "java"
            || t == "-jar"
            || ["-Xmx", "-Xms", "-XX:", "-javaagent"]
                .iter()
                .any(|p| t.starts_with(p))
    });
    let name = image_name(c.image());
    let by_image = JVM_IMAGE_WORDS.iter().any(|w| contains_word(name, w));
    let by_env = c
        .env()
        .iter()
        .any(|(k, v)| JVM_OPTION_VARS.contains(&k.as_str()) && !v.trim().is_empty());
    by_argv || by_image || by_env
}

fn looks_like_python<C: TemplateContainer + ?Sized>(c: &C) -> bool {
    let by_argv = argv(c).any(|t| {
        let f = file_name(t);
        f.starts_with("python") || f.starts_with("pypy") || PYTHON_PROGRAMS.contains(&f)
    });
    let name = image_name(c.image());
    by_argv || starts_with_word(name, "python") || starts_with_word(name, "pypy")
}
