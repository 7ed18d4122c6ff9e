//! Helpers shared by the coordinator's integration tests: a real etcd process on free ports, and
//! the workload the fleet tests run and check from the outside (the audit log, the objects).
#![allow(dead_code)]

pub mod etcd;
pub mod workload;

/// A port nobody listens on now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port()
}
