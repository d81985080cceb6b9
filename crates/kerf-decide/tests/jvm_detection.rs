//! JVM and Python detection (design D7; EV-35, EV-36).

use kerf_api::rsr::ContainerFlag;
use kerf_decide::jvm::{ContainerView, Runtime, detect, fixed_heap, jvm_or_python};

fn container(image: &str, command: &[&str], args: &[&str], env: &[(&str, &str)]) -> ContainerView {
    ContainerView {
        image: image.into(),
        command: command.iter().map(|s| (*s).to_owned()).collect(),
        args: args.iter().map(|s| (*s).to_owned()).collect(),
        env: env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
    }
}

/// An `app` image container started with `command` and `args`.
fn app_cmd(command: &[&str], args: &[&str]) -> ContainerView {
    container("registry/app:1", command, args, &[])
}

/// An `app` image container with the one variable `name` set to `value`.
fn app_env(name: &str, value: &str) -> ContainerView {
    container("registry/app:1", &[], &[], &[(name, value)])
}

// rule: EV-35
#[test]
fn ev_35_a_fixed_heap_is_found_in_command_args_and_option_variables() {
    let cases = [
        app_cmd(&["java", "-Xmx512m", "-jar", "app.jar"], &[]),
        app_cmd(&["/bin/sh", "-c"], &["exec java -Xmx1g -jar /app.jar"]),
        app_cmd(&[], &["-XX:MaxHeapSize=1g"]),
        app_env("JAVA_TOOL_OPTIONS", "-XX:+UseG1GC -Xmx768m"),
        app_env("JDK_JAVA_OPTIONS", "-Xmx2g"),
        app_env("JAVA_OPTS", "-XX:MaxHeapSize=512m"),
    ];
    for c in &cases {
        assert!(fixed_heap(c), "{c:?}");
        let r = detect(&[], c);
        assert!(r.fixed_heap && r.jvm, "{c:?}");
    }
    // Percentages of RAM are not a fixed heap; other variables are not read.
    let not_fixed = [
        container(
            "eclipse-temurin:21",
            &["java", "-XX:MaxRAMPercentage=75", "-jar", "a.jar"],
            &[],
            &[],
        ),
        app_env("OTHER_OPTS", "-Xmx1g"),
    ];
    for c in &not_fixed {
        assert!(!fixed_heap(c), "{c:?}");
    }
}

// rule: EV-36
#[test]
fn ev_36_the_hub_flag_marks_a_fixed_heap() {
    let plain = app_cmd(&["/app"], &[]);
    let r = detect(&[ContainerFlag::JvmFixedHeap], &plain);
    assert_eq!(
        r,
        Runtime {
            jvm: true,
            python: false,
            fixed_heap: true
        }
    );
    assert_eq!(detect(&[], &plain), Runtime::default());
}

#[test]
fn hub_flags_decide_the_runtime_over_the_heuristic() {
    let looks_java = container("openjdk:17", &["java", "-jar", "a.jar"], &[], &[]);
    assert_eq!(
        detect(&[ContainerFlag::Python], &looks_java),
        Runtime {
            jvm: false,
            python: true,
            fixed_heap: false
        }
    );
    let plain = app_cmd(&["/app"], &[]);
    assert_eq!(
        detect(&[ContainerFlag::Jvm], &plain),
        Runtime {
            jvm: true,
            python: false,
            fixed_heap: false
        }
    );
    // Throttled or OOM-killed flags say nothing about the runtime.
    assert!(detect(&[ContainerFlag::Throttled], &looks_java).jvm);
}

#[test]
fn the_heuristic_recognises_jvms() {
    let jvms = [
        container("openjdk:17", &[], &[], &[]),
        container(
            "docker.io/library/eclipse-temurin:21-jre@sha256:abc",
            &[],
            &[],
            &[],
        ),
        container("amazoncorretto:21", &[], &[], &[]),
        container("registry:5000/team/tomcat:10", &[], &[], &[]),
        app_cmd(&["/usr/bin/java"], &["-cp", "x", "Main"]),
        app_cmd(&["/bin/sh"], &["-c", "exec app -javaagent:/otel.jar"]),
        app_env("JAVA_TOOL_OPTIONS", "-XX:+UseZGC"),
    ];
    for c in &jvms {
        let r = detect(&[], c);
        assert!(r.jvm && !r.python && !r.fixed_heap, "{c:?}");
        assert!(jvm_or_python(c));
    }
}

#[test]
fn the_heuristic_recognises_python() {
    let pythons = [
        container("python:3.12-slim", &[], &[], &[]),
        app_cmd(&["python3", "-m", "app"], &[]),
        app_cmd(&["/usr/local/bin/python3.11"], &[]),
        app_cmd(&["gunicorn"], &["app:wsgi"]),
        container("pypy:3.10", &[], &[], &[]),
    ];
    for c in &pythons {
        let r = detect(&[], c);
        assert!(r.python && !r.jvm, "{c:?}");
        assert!(r.needs_restart_for_memory());
    }
}

#[test]
fn other_containers_are_neither() {
    let others = [
        container("nginx:1.27", &["nginx", "-g", "daemon off;"], &[], &[]),
        container(
            "registry/go-app:1",
            &["/app"],
            &["--port", "8080"],
            &[("JAVA_HOME_UNUSED", "x")],
        ),
        container("busybox", &[], &[], &[]),
    ];
    for c in &others {
        assert_eq!(detect(&[], c), Runtime::default(), "{c:?}");
        assert!(!jvm_or_python(c));
    }
}
