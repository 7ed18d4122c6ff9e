//! Generated gRPC types and services of the batchfleet ownership protocol and admin API.

#[allow(clippy::all, clippy::pedantic)]
pub mod v1 {
    tonic::include_proto!("batchfleet.v1");

    /// Every message and service of the package, encoded, for gRPC server reflection.
    pub const FILE_DESCRIPTOR_SET: &[u8] = tonic::include_file_descriptor_set!("batchfleet_descriptor");
}

/// The gRPC metadata key in which a standby coordinator names the leader's address; workers and
/// fleetctl follow it.
pub const LEADER_HINT: &str = "x-fleet-leader";

#[cfg(test)]
mod tests {
    use prost::Message;

    use super::v1::{Ack, ShardAssignment, Step};

    /// `Ack` as it was before `activate_micros` (field 5): what an older worker sends and an
    /// older coordinator reads.
    #[derive(Clone, PartialEq, prost::Message)]
    struct AckBefore {
        #[prost(uint64, tag = "1")]
        session_id: u64,
        #[prost(message, optional, tag = "2")]
        assignment: Option<ShardAssignment>,
        #[prost(string, tag = "3")]
        last_write_resource_version: String,
        #[prost(enumeration = "Step", tag = "4")]
        step: i32,
    }

    fn before() -> AckBefore {
        AckBefore {
            session_id: 7,
            assignment: Some(ShardAssignment { shard: 3, epoch: 9 }),
            last_write_resource_version: "1200".into(),
            step: Step::Activated.into(),
        }
    }

    #[test]
    fn acks_with_and_without_the_activate_time_are_understood_both_ways() {
        // An older worker's ACTIVATED: not measured.
        let old = Ack::decode(before().encode_to_vec().as_slice()).expect("decodes");
        assert_eq!(old.activate_micros, None);
        assert_eq!((old.session_id, old.step, old.last_write_resource_version.as_str()), (7, 3, "1200"));
        // A newer worker's ACTIVATED, read by an older coordinator: the field is skipped.
        let new = Ack { activate_micros: Some(1_500), ..old.clone() };
        assert_eq!(AckBefore::decode(new.encode_to_vec().as_slice()).expect("decodes"), before());
        assert_eq!(
            Ack::decode(new.encode_to_vec().as_slice()).expect("decodes").activate_micros,
            Some(1_500)
        );
        // Not measured encodes exactly as before.
        assert_eq!(old.encode_to_vec(), before().encode_to_vec());
    }

    /// A newer worker's refusal reaches an older coordinator as a step it does not know (it
    /// rejects the acknowledgement and resends PREPARE, as before); `held_epoch` is skipped.
    #[test]
    fn a_refusal_decodes_on_an_older_coordinator_as_an_unknown_step() {
        let refused = Ack {
            step: Step::Refused.into(),
            held_epoch: Some(12),
            ..Ack::decode(before().encode_to_vec().as_slice()).expect("decodes")
        };
        let old = AckBefore::decode(refused.encode_to_vec().as_slice()).expect("decodes");
        assert_eq!(old.step, 5);
        assert_eq!(Ack::decode(refused.encode_to_vec().as_slice()).expect("decodes").held_epoch, Some(12));
    }
}
