//! The executor's writes through kube's real Client against kerf-sim, which answers as a
//! v1.36 API server does (conformance 01, 02, 08-11, 16).

mod executor_sim {
    use std::time::Duration;

    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
    use k8s_openapi::api::core::v1::Pod;
    use k8s_openapi::api::policy::v1::PodDisruptionBudget;
    use kerf_agent::cache::pods::PodWire;
    use kerf_agent::cache::{Interner, PodInfo};
    use kerf_agent::executor::hpa::{HpaError, MetricSource, write_hpa_target};
    use kerf_agent::executor::ondelete::{EvictOutcome, evict_pod};
    use kerf_agent::executor::resize::{ResizeError, resize_pod};
    use kerf_agent::executor::rollout::{Applied, apply_template, release};
    use kerf_agent::executor::{ContainerResources, WorkloadId};
    use kerf_agent::reconcile::facts::pod_facts;
    use kerf_api::{Resource, ResourceRequirements, ResourceValues, WorkloadKind};
    use kerf_decide::facts::PodFacts;
    use kerf_decide::inplace::{InPlaceInput, InPlaceOutcome, plan};
    use kerf_sim::sim::Sim;
    use kube::Api;
    use kube::api::PostParams;
    use serde_json::{Value, json};

    /// A pod as a pass reads it: decoded as the watch decodes it into the cache's record,
    /// then into the decision's view.
    fn pod_view(pod: &Pod) -> anyhow::Result<PodFacts> {
        let wire: PodWire = serde_json::from_value(serde_json::to_value(pod)?)?;
        Ok(pod_facts(&PodInfo::from_wire(
            wire,
            &mut Interner::default(),
        )))
    }

    async fn start() -> anyhow::Result<Sim> {
        kerf_testkit::sim().await
    }

    fn values(cpu: Option<&str>, memory: Option<&str>) -> ResourceValues {
        ResourceValues {
            cpu: cpu.map(Into::into),
            memory: memory.map(Into::into),
        }
    }

    fn change(cpu: &str) -> Vec<ContainerResources> {
        vec![(
            "app".into(),
            ResourceRequirements {
                requests: values(Some(cpu), None),
                limits: ResourceValues::default(),
            },
        )]
    }

    /// A Deployment as `kubectl apply` (client-side) creates it: requests cpu 100m, memory 64Mi.
    /// A sim with the client-side-applied Deployment `name`, to whose template Kerf
    /// applied `cpu` as the `app` container's CPU request.
    async fn kerf_applied(
        name: &str,
        cpu: &str,
    ) -> anyhow::Result<(Sim, kube::Client, WorkloadId, Applied)> {
        let sim = start().await?;
        let client = sim.client();
        let web = client_side_applied(&client, name).await?;
        let applied = apply_template(client.clone(), &web, &change(cpu), &[Resource::Cpu]).await?;
        Ok((sim, client, web, applied))
    }

    async fn client_side_applied(client: &kube::Client, name: &str) -> anyhow::Result<WorkloadId> {
        let api: Api<Deployment> = Api::namespaced(client.clone(), "default");
        let d: Deployment = serde_json::from_value(json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [
                    {"name": "app", "image": "registry.k8s.io/pause:3.10",
                     "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]}}}
        }))?;
        let pp = PostParams {
            field_manager: Some("kubectl-client-side-apply".into()),
            ..PostParams::default()
        };
        let made = api.create(&pp, &d).await?;
        Ok(WorkloadId {
            namespace: "default".into(),
            name: name.into(),
            uid: made.metadata.uid.unwrap_or_default(),
            kind: WorkloadKind::Deployment,
        })
    }

    async fn get_json(client: &kube::Client, name: &str) -> anyhow::Result<Value> {
        let api: Api<Deployment> = Api::namespaced(client.clone(), "default");
        Ok(serde_json::to_value(api.get(name).await?)?)
    }

    fn manager<'a>(obj: &'a Value, name: &str) -> Option<&'a Value> {
        obj["metadata"]["managedFields"]
            .as_array()?
            .iter()
            .find(|m| m["manager"] == name)
    }

    fn app_resources(obj: &Value) -> &Value {
        &obj["spec"]["template"]["spec"]["containers"][0]["resources"]
    }

    // rule: AP-19, AP-20
    #[tokio::test]
    async fn rollout_takes_exactly_the_cpu_field_from_client_side_apply() -> anyhow::Result<()> {
        let (_sim, client, _, applied) = kerf_applied("web", "200m").await?;
        assert_eq!(applied.containers, ["app"]);
        let obj = get_json(&client, "web").await?;
        assert_eq!(
            app_resources(&obj)["requests"],
            json!({"cpu": "200m", "memory": "64Mi"})
        );
        let kerf = manager(&obj, "kerf")
            .ok_or_else(|| anyhow::anyhow!("no kerf entry: {}", obj["metadata"]))?;
        assert_eq!(kerf["operation"], "Apply");
        assert_eq!(
            kerf["fieldsV1"],
            json!({"f:spec": {"f:template": {"f:spec": {"f:containers": {"k:{\"name\":\"app\"}": {
                ".": {}, "f:name": {}, "f:resources": {"f:requests": {"f:cpu": {}}}}}}}}})
        );
        let csa = manager(&obj, "kubectl-client-side-apply")
            .map(|m| m["fieldsV1"].to_string())
            .unwrap_or_default();
        assert!(
            !csa.contains("f:cpu"),
            "kubectl-client-side-apply still owns cpu: {csa}"
        );
        assert!(csa.contains("f:memory"), "{csa}");
        Ok(())
    }

    // rule: RB-23
    #[tokio::test]
    async fn rollback_of_a_rollout_patches_the_template_back() -> anyhow::Result<()> {
        let (_sim, client, web, _) = kerf_applied("back", "200m").await?;
        apply_template(client.clone(), &web, &change("100m"), &[Resource::Cpu]).await?;
        let obj = get_json(&client, "back").await?;
        assert_eq!(app_resources(&obj)["requests"]["cpu"], "100m");
        Ok(())
    }

    // rule: AP-21, EV-46
    #[tokio::test]
    async fn release_keeps_the_values_and_removes_kerf_from_managed_fields() -> anyhow::Result<()> {
        let (_sim, client, web, _) = kerf_applied("rel", "200m").await?;
        let before = get_json(&client, "rel").await?;
        let out = release(client.clone(), &web, &[Resource::Cpu]).await?;
        assert_eq!(out.released, ["app/requests.cpu"]);
        let obj = get_json(&client, "rel").await?;
        assert_eq!(
            obj["metadata"]["generation"],
            before["metadata"]["generation"]
        );
        assert_eq!(
            app_resources(&obj)["requests"],
            json!({"cpu": "200m", "memory": "64Mi"})
        );
        assert!(
            manager(&obj, "kerf").is_none(),
            "kerf still listed: {}",
            obj["metadata"]["managedFields"]
        );
        // The hand-over's entry is removed too: no `kerf*` manager is left.
        assert!(
            manager(&obj, "kerf-released").is_none(),
            "kerf-released still listed: {}",
            obj["metadata"]["managedFields"]
        );
        // Nothing left to release: no call changes anything.
        assert!(
            release(client.clone(), &web, &[Resource::Cpu])
                .await?
                .released
                .is_empty()
        );
        Ok(())
    }

    #[tokio::test]
    async fn apply_refuses_a_workload_that_was_made_again() -> anyhow::Result<()> {
        let sim = start().await?;
        let client = sim.client();
        let mut web = client_side_applied(&client, "again").await?;
        web.uid = "another-uid".into();
        let err = apply_template(client.clone(), &web, &change("200m"), &[Resource::Cpu]).await;
        assert!(
            matches!(
                err,
                Err(kerf_agent::executor::rollout::ApplyError::Replaced { .. })
            ),
            "{err:?}"
        );
        Ok(())
    }

    /// A sim with the Ready pod `name` labelled `app`, a client and the pods' API.
    async fn sim_with_ready_pod(
        name: &str,
        app: &str,
    ) -> anyhow::Result<(Sim, kube::Client, Api<Pod>)> {
        let sim = start().await?;
        let client = sim.client();
        let api = ready_pod(&client, name, json!({ "app": app })).await?;
        Ok((sim, client, api))
    }

    /// Creates the pod `name` with `labels` and waits until it is Ready.
    async fn ready_pod(
        client: &kube::Client,
        name: &str,
        labels: Value,
    ) -> anyhow::Result<Api<Pod>> {
        let api = pod(client, name, labels).await?;
        wait_for(&api, name, is_ready).await?;
        Ok(api)
    }

    /// Creates the object `manifest` in `default` and gives its kind's API there.
    async fn create<K>(client: &kube::Client, manifest: Value) -> anyhow::Result<Api<K>>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
            + Clone
            + std::fmt::Debug
            + serde::Serialize
            + serde::de::DeserializeOwned,
    {
        let api: Api<K> = Api::namespaced(client.clone(), "default");
        let object: K = serde_json::from_value(manifest)?;
        api.create(&PostParams::default(), &object).await?;
        Ok(api)
    }

    async fn pod(client: &kube::Client, name: &str, labels: Value) -> anyhow::Result<Api<Pod>> {
        create(
            client,
            json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "labels": labels},
            "spec": {"nodeSelector": {"kubernetes.io/hostname": "sim-node-1"}, "containers": [
                {"name": "app", "image": "registry.k8s.io/pause:3.10",
                 "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"cpu": "200m", "memory": "256Mi"}}}]}
            }),
        )
        .await
    }

    async fn wait_for(api: &Api<Pod>, name: &str, f: impl Fn(&Pod) -> bool) -> anyhow::Result<Pod> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        loop {
            let p = api.get(name).await?;
            if f(&p) {
                return Ok(p);
            }
            if tokio::time::Instant::now() > deadline {
                anyhow::bail!("pod {name} never reached the state: {:?}", p.status);
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    fn is_ready(p: &Pod) -> bool {
        p.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
    }

    // A restartable init container (sidecar) is resized in place under
    // `spec.initContainers` (design D8); its status resources count for the state machine.
    // rule: AP-04
    #[tokio::test]
    async fn a_sidecar_is_resized_under_init_containers_and_counts_as_accepted()
    -> anyhow::Result<()> {
        let sim = start().await?;
        let client = sim.client();
        let manifest = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "rs-side", "namespace": "default"},
            "spec": {"initContainers": [
                {"name": "proxy", "image": "registry.k8s.io/pause:3.10", "restartPolicy": "Always",
                 "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}],
              "containers": [
                {"name": "app", "image": "registry.k8s.io/pause:3.10",
                 "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}]}
        });
        let api: Api<Pod> = create(&client, manifest).await?;
        wait_for(&api, "rs-side", is_ready).await?;
        let target: Vec<ContainerResources> = vec![
            (
                "app".into(),
                ResourceRequirements {
                    requests: values(Some("150m"), None),
                    limits: ResourceValues::default(),
                },
            ),
            (
                "proxy".into(),
                ResourceRequirements {
                    requests: values(Some("50m"), None),
                    limits: ResourceValues::default(),
                },
            ),
        ];
        resize_pod(client.clone(), "default", "rs-side", &target, &["proxy"]).await?;
        let p = api.get("rs-side").await?;
        let cpu = |c: &k8s_openapi::api::core::v1::Container| {
            c.resources
                .as_ref()
                .and_then(|r| r.requests.as_ref())
                .and_then(|r| r.get("cpu"))
                .map(|q| q.0.clone())
        };
        let spec = p.spec.clone().unwrap_or_default();
        assert_eq!(spec.containers.len(), 1, "no container was added");
        assert_eq!(cpu(&spec.containers[0]).as_deref(), Some("150m"));
        let init = spec.init_containers.unwrap_or_default();
        assert_eq!(cpu(&init[0]).as_deref(), Some("50m"));
        let view = pod_view(&p)?;
        assert!(
            view.spec_resources.iter().any(|(n, _)| n == "proxy"),
            "{view:?}"
        );
        wait_for(&api, "rs-side", |p| {
            pod_view(p).is_ok_and(|v| kerf_decide::inplace::pod_state(&v, &target).is_accepted())
        })
        .await?;
        Ok(())
    }

    // rule: AP-04, EV-10
    #[tokio::test]
    async fn resize_is_accepted_and_the_state_machine_sees_it_applied() -> anyhow::Result<()> {
        let (_sim, client, api) = sim_with_ready_pod("rs-ok", "rs").await?;
        let target = change("150m");
        let sent = resize_pod(client.clone(), "default", "rs-ok", &target, &[]).await?;
        assert_eq!(sent.generation, Some(2));
        let p = api.get("rs-ok").await?;
        let spec_cpu = p
            .spec
            .as_ref()
            .and_then(|s| s.containers[0].resources.as_ref())
            .and_then(|r| r.requests.as_ref())
            .and_then(|r| r.get("cpu"))
            .map(|q| q.0.clone());
        assert_eq!(spec_cpu.as_deref(), Some("150m"));
        let done = wait_for(&api, "rs-ok", |p| {
            pod_view(p).is_ok_and(|v| kerf_decide::inplace::pod_state(&v, &target).is_accepted())
        })
        .await?;
        let now = chrono::Utc::now();
        let views = [pod_view(&done)?];
        let plan = plan(&InPlaceInput {
            kind: WorkloadKind::Deployment,
            rollout_safe: true,
            target: &target,
            pods: &views,
            first_resize_at: Some(now),
            fallback_after: chrono::Duration::minutes(10),
            may_start: true,
            now,
        });
        assert_eq!(plan.outcome, InPlaceOutcome::AllAccepted);
        Ok(())
    }

    // rule: AP-08
    #[tokio::test]
    async fn resize_beyond_the_node_is_infeasible() -> anyhow::Result<()> {
        let (_sim, client, _) = sim_with_ready_pod("rs-big", "big").await?;
        let big = vec![(
            "app".to_owned(),
            ResourceRequirements {
                requests: values(Some("5"), None),
                limits: values(Some("5"), None),
            },
        )];
        match resize_pod(client.clone(), "default", "rs-big", &big, &[]).await {
            Err(ResizeError::Infeasible { message }) => {
                assert!(
                    message.contains("node didn't have enough allocatable"),
                    "{message}"
                );
            }
            other => anyhow::bail!("expected Infeasible, got {other:?}"),
        }
        Ok(())
    }

    /// A client without kube's own 429 retries, so a PDB refusal comes back at once.
    async fn client_without_retries(sim: &Sim) -> anyhow::Result<kube::Client> {
        let kc = kube::config::Kubeconfig::read_from(sim.kubeconfig_path())?;
        let mut config = kube::Config::from_custom_kubeconfig(kc, &Default::default()).await?;
        config.default_retry = false;
        Ok(kube::Client::try_from(config)?)
    }

    // rule: AP-60, AP-61, EV-42
    #[tokio::test]
    async fn eviction_blocked_by_a_pdb_is_a_refusal_that_can_be_retried() -> anyhow::Result<()> {
        let sim = start().await?;
        let client = client_without_retries(&sim).await?;
        let api = ready_pod(&client, "db-0", json!({"app": "db"})).await?;
        let pdbs: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), "default");
        let pdb: PodDisruptionBudget = serde_json::from_value(json!({
            "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": "db-pdb", "namespace": "default"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "db"}}}
        }))?;
        pdbs.create(&PostParams::default(), &pdb).await?;
        for _ in 0..2 {
            match evict_pod(client.clone(), "default", "db-0").await? {
                EvictOutcome::Refused { pod, message } => {
                    assert_eq!(pod, "db-0");
                    assert!(message.contains("disruption budget"), "{message}");
                }
                other => anyhow::bail!("expected a refusal, got {other:?}"),
            }
        }
        assert!(
            api.get_opt("db-0").await?.is_some(),
            "a refused eviction must not delete the pod"
        );
        pdbs.delete("db-pdb", &Default::default()).await?;
        assert_eq!(
            evict_pod(client.clone(), "default", "db-0").await?,
            EvictOutcome::Evicted { pod: "db-0".into() }
        );
        Ok(())
    }

    // rule: RB-24
    #[tokio::test]
    async fn hpa_target_is_written_and_restored_under_kerf_hpa() -> anyhow::Result<()> {
        let sim = start().await?;
        let client = sim.client();
        let manifest = json!({
            "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "scaled", "namespace": "default"},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}, "minReplicas": 1, "maxReplicas": 5,
                "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 60}}}]}
        });
        let api: Api<HorizontalPodAutoscaler> = create(&client, manifest).await?;
        // The HPA's first metric target: `old` to `new`, if it still is `old`.
        let write_scaled = |old, new| {
            write_hpa_target(
                client.clone(),
                "default",
                "scaled",
                0,
                MetricSource::Resource,
                old,
                new,
            )
        };
        let utilization = |obj: &Value| {
            obj["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"].clone()
        };
        write_scaled(60, 75).await?;
        let obj = serde_json::to_value(api.get("scaled").await?)?;
        assert_eq!(utilization(&obj), 75);
        assert!(
            manager(&obj, "kerf-hpa").is_some(),
            "{}",
            obj["metadata"]["managedFields"]
        );
        // Someone else's target is never overwritten: the test operation fails.
        let stale = write_scaled(60, 50).await;
        assert!(matches!(stale, Err(HpaError::Invalid { .. })), "{stale:?}");
        write_scaled(75, 60).await?;
        let obj = serde_json::to_value(api.get("scaled").await?)?;
        assert_eq!(utilization(&obj), 60);
        Ok(())
    }
}
