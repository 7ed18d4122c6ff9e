//! The leader's fleet state machine (`FleetState::step`) fed what the network can send it: worker
//! registrations reporting arbitrary held shards and epochs, acknowledgements of any step for any
//! shard and epoch (as `FleetSession.Acknowledge` turns a `pb::Ack` into an [`Ack`]), liveness
//! changes, operator requests and time passing. Also decodes the raw bytes as each request
//! message of the session service.
#![no_main]

use std::time::{Duration, Instant};

use batchfleet_coordinator::fleet::state::{
    Ack, FleetConfig, FleetState, HeldPhase, HeldShard, Step, StepInput, WorkerHealth,
};
use batchfleet_coordinator::ids::{ShardId, WorkerId};
use batchfleet_coordinator::store::{ShardMapRecord, ShardRecord};
use batchfleet_proto::v1 as pb;
use libfuzzer_sys::arbitrary::{self, Arbitrary, Unstructured};
use libfuzzer_sys::fuzz_target;
use prost::Message;

const WORKERS: [&str; 4] = ["w0", "w1", "w2", "w3"];

#[derive(Debug, Arbitrary)]
enum Health {
    Live,
    Disconnected,
    Expiring,
    Gone,
    Absent,
}

#[derive(Debug, Arbitrary)]
enum Phase {
    Preparing,
    Active,
    Revoking,
}

#[derive(Debug, Arbitrary)]
enum AckStep {
    Prepared,
    Revoked,
    Activated,
    Dropped,
    Refused(Option<u64>),
}

#[derive(Debug, Arbitrary)]
enum Event {
    Health {
        worker: u8,
        health: Health,
    },
    Register {
        worker: u8,
        held: Vec<(u32, u64, Phase)>,
    },
    Ack {
        worker: u8,
        shard: u32,
        epoch: u64,
        step: AckStep,
        last_write: Option<String>,
    },
    /// An ack for the command the state machine sent last (most paths need the right epoch).
    AckLastSent {
        step: AckStep,
    },
    Load {
        shard: u32,
        load: f64,
    },
    Drain {
        worker: u8,
        draining: bool,
    },
    RequestMove {
        shard: u32,
        to: u8,
    },
    Pin {
        shard: u32,
        worker: Option<u8>,
    },
    Plan {
        rebalance: bool,
    },
    Advance {
        millis: u16,
    },
    Step,
}

#[derive(Debug, Arbitrary)]
struct Input {
    shard_count: u8,
    stored: Vec<(u32, Option<u8>, u64, Option<u8>)>,
    events: Vec<Event>,
}

fn worker(n: u8) -> WorkerId {
    WorkerId(WORKERS[usize::from(n) % WORKERS.len()].to_string())
}

fn step_of(step: AckStep) -> Step {
    match step {
        AckStep::Prepared => Step::Prepared,
        AckStep::Revoked => Step::Revoked,
        AckStep::Activated => Step::Activated,
        AckStep::Dropped => Step::Dropped,
        AckStep::Refused(held_epoch) => Step::Refused { held_epoch },
    }
}

fn run(input: Input) {
    // What ran, for the message of a failed check (the crash input itself is opaque bytes).
    let mut trace = format!("shard_count {}, stored {:?}", input.shard_count, input.stored);
    let shard_count = u32::from(input.shard_count);
    let map = ShardMapRecord {
        shard_count,
        shards: input
            .stored
            .into_iter()
            .map(|(shard, owner, epoch, moving_to)| {
                let record = ShardRecord {
                    owner: owner.map(|w| worker(w).0),
                    epoch,
                    moving_to: moving_to.map(|w| worker(w).0),
                };
                (shard, record)
            })
            .collect(),
        ..ShardMapRecord::default()
    };
    let mut now = Instant::now();
    let mut state = FleetState::new(map, FleetConfig::default(), now);
    let mut input_step = StepInput { now: Some(now), ..StepInput::default() };
    let mut last_sent: Option<(WorkerId, ShardId, u64)> = None;
    for event in input.events {
        trace.push_str(&format!("\n{event:?}"));
        match event {
            Event::Health { worker: w, health } => {
                let health = match health {
                    Health::Live => Some(WorkerHealth::Live),
                    Health::Disconnected => Some(WorkerHealth::Disconnected),
                    Health::Expiring => Some(WorkerHealth::Expiring),
                    Health::Gone => Some(WorkerHealth::Gone),
                    Health::Absent => None,
                };
                match health {
                    Some(h) => input_step.workers.insert(worker(w), h),
                    None => input_step.workers.remove(&worker(w)),
                };
            }
            Event::Register { worker: w, held } => {
                let held = held
                    .into_iter()
                    .map(|(shard, epoch, phase)| HeldShard {
                        shard: ShardId(shard),
                        epoch,
                        phase: match phase {
                            Phase::Preparing => HeldPhase::Preparing,
                            Phase::Active => HeldPhase::Active,
                            Phase::Revoking => HeldPhase::Revoking,
                        },
                    })
                    .collect();
                input_step.registrations.push((worker(w), held));
            }
            Event::Ack { worker: w, shard, epoch, step, last_write } => {
                let ack =
                    Ack { worker: worker(w), shard: ShardId(shard), epoch, step: step_of(step), last_write };
                input_step.acks.push(ack);
            }
            Event::AckLastSent { step } => {
                if let Some((w, shard, epoch)) = last_sent.clone() {
                    input_step.acks.push(Ack {
                        worker: w,
                        shard,
                        epoch,
                        step: step_of(step),
                        last_write: None,
                    });
                }
            }
            Event::Load { shard, load } => {
                input_step.loads.insert(ShardId(shard), load);
            }
            Event::Drain { worker: w, draining } => state.set_draining(&worker(w), draining),
            Event::RequestMove { shard, to } => state.request_move(ShardId(shard), worker(to)),
            Event::Pin { shard, worker: w } => state.pin(ShardId(shard), w.map(worker).as_ref()),
            Event::Plan { rebalance } => {
                let _ = state.plan(&input_step, rebalance);
            }
            Event::Advance { millis } => {
                now += Duration::from_millis(u64::from(millis)) * 100;
                input_step.now = Some(now);
            }
            Event::Step => {
                let out = state.step(&input_step);
                use batchfleet_coordinator::fleet::state::Command;
                trace.push_str(&format!(" -> store {} sends {:?}", out.store, out.sends));
                for (w, command) in out.sends {
                    match command {
                        Command::Prepare { shard, epoch }
                        | Command::Revoke { shard, epoch }
                        | Command::Activate { shard, epoch, .. }
                        | Command::Drop { shard, epoch } => last_sent = Some((w, shard, epoch)),
                        Command::DrainComplete => {}
                    }
                }
                input_step.registrations.clear();
                input_step.acks.clear();
                let _ = state.take_finished();
                let _ = state.take_gap_observations();
                let unowned = state.shards_without_acting_owner();
                assert!(
                    unowned <= shard_count as usize,
                    "{unowned} shards without an owner of {shard_count}: {trace}"
                );
                for shard in 0..shard_count {
                    let _ = (state.shard_state(ShardId(shard)), state.owner(ShardId(shard)));
                }
                let _ = state.shards_by_owner();
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let _ = pb::RegisterRequest::decode(data);
    let _ = pb::HeartbeatRequest::decode(data);
    let _ = pb::Ack::decode(data);
    let _ = pb::CommandStreamRequest::decode(data);
    if let Ok(input) = Input::arbitrary_take_rest(Unstructured::new(data)) {
        run(input);
    }
});
