//! Three ways the world misbehaves around the control plane, each a scenario run by a test
//! suite (which asserts) and by `bench_resilience` (which reports the figure in `bench all`):
//!
//! - [`dead_flow`]: a load balancer black-holes an idle flow; how soon the agent notices and
//!   is back (issue 32 part 4: within two heartbeats);
//! - [`crowd`]: unauthenticated connections fill the control plane's descriptors; whether
//!   honest agents still get in on their first attempt;
//! - [`database_restart`]: PostgreSQL restarts under callers; whether every answer is a
//!   success or a retryable 503 with `Retry-After`.
//!
//! Each starts its own [`World`](crate::world::World) and stops it when done.

pub mod crowd;
pub mod database_restart;
pub mod dead_flow;
