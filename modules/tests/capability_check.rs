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
}
