//! A Score that needs a capability compiles only against a Topology that has it.

#[test]
fn capability_bounds_are_checked_at_compile_time() {
    let t = trybuild::TestCases::new();
    t.pass("tests/ui/k8s_score_on_render_topology.rs");
    t.compile_fail("tests/ui/k8s_score_on_topology_without_k8s.rs");
    t.pass("tests/ui/region_rollout_on_region_site_topology.rs");
    t.compile_fail("tests/ui/region_rollout_on_topology_without_region_admin.rs");
    t.pass("tests/ui/tenant_score_on_tenant_admin_topology.rs");
    t.compile_fail("tests/ui/tenant_score_on_topology_without_tenant_admin.rs");
    t.pass("tests/ui/okd_score_on_ha_cluster_topology.rs");
    t.compile_fail("tests/ui/okd_score_on_render_topology.rs");
    t.pass("tests/ui/postgresql_scores_on_kubernetes_topologies.rs");
    t.compile_fail("tests/ui/postgresql_score_on_topology_without_postgresql.rs");
    t.compile_fail("tests/ui/multisite_postgresql_on_topology_without_sites.rs");
    t.compile_fail("tests/ui/multisite_postgresql_on_bare_metal_sites.rs");
}
