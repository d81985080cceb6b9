//! The resize request and the classification of its answers, without a server (the
//! in-place state machine is `kerf-decide/tests/inplace_plan.rs`).

mod executor_inplace {
    use kerf_agent::executor::resize::{ResizeError, left_out, resize_body};
    use kerf_agent::executor::{ContainerResources, ErrorClass};
    use kerf_api::{Resource, ResourceRequirements, ResourceValues};
    use kerf_testkit::api::requests as req;
    use kube::core::Status;
    use serde_json::json;

    fn old() -> Vec<ContainerResources> {
        vec![("app".into(), req("100m", "128Mi"))]
    }

    // rule: RB-22
    #[test]
    fn rollback_in_place_resizes_pods_back_to_the_old_values() {
        // Which pods go back is kerf_decide::health::restore (its rb_22 test); the resize
        // sends the old values.
        let back = old();
        assert_eq!(
            resize_body(&back, &[])["spec"]["containers"][0]["resources"]["requests"]["cpu"],
            "100m"
        );
    }

    // rule: AP-17
    #[test]
    fn a_limit_removal_is_never_sent_as_a_resize() {
        let current = vec![(
            "app".to_owned(),
            ResourceRequirements {
                requests: ResourceValues {
                    cpu: Some("100m".into()),
                    memory: Some("128Mi".into()),
                },
                limits: ResourceValues {
                    cpu: Some("200m".into()),
                    memory: Some("256Mi".into()),
                },
            },
        )];
        let target = vec![(
            "app".to_owned(),
            ResourceRequirements {
                requests: ResourceValues {
                    cpu: Some("150m".into()),
                    memory: None,
                },
                limits: ResourceValues {
                    cpu: None,
                    memory: Some("256Mi".into()),
                },
            },
        )];
        let body = resize_body(&target, &[]);
        assert_eq!(
            body,
            json!({"spec": {"containers": [{"name": "app", "resources": {"requests": {"cpu": "150m"}, "limits": {"memory": "256Mi"}}}]}})
        );
        assert!(!body.to_string().contains("null"));
        let out = left_out(&current, &target);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].resource, Resource::Cpu);
        assert!(out[0].message.contains("200m"), "{}", out[0].message);
    }

    // rule: AP-04
    #[test]
    fn a_sidecar_goes_under_init_containers_in_the_resize_body() {
        let r = |cpu: &str| ResourceRequirements {
            requests: ResourceValues {
                cpu: Some(cpu.into()),
                memory: None,
            },
            limits: ResourceValues::default(),
        };
        let target = vec![("app".into(), r("150m")), ("proxy".into(), r("50m"))];
        assert_eq!(
            resize_body(&target, &["proxy"]),
            json!({"spec": {
                "containers": [{"name": "app", "resources": {"requests": {"cpu": "150m"}}}],
                "initContainers": [{"name": "proxy", "resources": {"requests": {"cpu": "50m"}}}]}})
        );
        let only_sidecar = vec![("proxy".into(), r("50m"))];
        assert_eq!(
            resize_body(&only_sidecar, &["proxy"]),
            json!({"spec": {"initContainers": [{"name": "proxy", "resources": {"requests": {"cpu": "50m"}}}]}})
        );
    }

    fn api_err(code: u16, reason: &str, message: &str) -> kube::Error {
        kube::Error::Api(Status::failure(message, reason).with_code(code).boxed())
    }

    #[test]
    fn only_a_403_naming_allocatable_is_infeasible() {
        let msg = "pods \"resize-too-big\" is forbidden: node didn't have enough allocatable resources: cpu, requested: 5000, allocatable: 4000";
        assert!(
            matches!(ResizeError::from_kube(api_err(403, "Forbidden", msg)), ResizeError::Infeasible { message } if message == msg)
        );
        let rbac = "pods \"p\" is forbidden: User \"system:serviceaccount:kerf:kerf\" cannot patch resource \"pods/resize\" in API group \"\" in the namespace \"a\"";
        let e = ResizeError::from_kube(api_err(403, "Forbidden", rbac));
        assert!(matches!(e, ResizeError::Forbidden { rbac: true, .. }));
        assert!(e.is_retryable());
        let quota = ResizeError::from_kube(api_err(403, "Forbidden", "exceeded quota: compute"));
        assert!(matches!(quota, ResizeError::Forbidden { rbac: false, .. }));
    }

    #[test]
    fn a_cluster_without_pods_resize_is_recognised() {
        for code in [404, 405] {
            let e = ResizeError::from_kube(api_err(
                code,
                "NotFound",
                "the server could not find the requested resource",
            ));
            assert!(
                matches!(e, ResizeError::NoResizeSubresource { .. }),
                "{code}: {e:?}"
            );
            assert!(!e.is_retryable());
        }
    }

    #[test]
    fn invalid_and_transient_answers_are_classified() {
        let e = ResizeError::from_kube(api_err(
            422,
            "Invalid",
            "Pod QOS Class may not change as a result of resizing",
        ));
        assert!(matches!(e, ResizeError::Invalid { .. }));
        assert_eq!(
            ResizeError::from_kube(api_err(409, "Conflict", "x")).category(),
            "conflict"
        );
        let e = ResizeError::from_kube(api_err(503, "ServiceUnavailable", "x"));
        assert!(matches!(e, ResizeError::Transient { .. }) && e.is_retryable());
        assert_eq!(
            ErrorClass::from_code(429, "").category(),
            "too_many_requests"
        );
    }
}
