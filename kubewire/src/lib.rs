//! The wire format of Kubernetes protobuf bodies (`application/vnd.kubernetes.protobuf`): a
//! bounds-checked reader and writer of protobuf fields, the `k8s\0` envelope around every body,
//! and the errors apimachinery words for a body it cannot read. The sim serves and reads these
//! bodies; the worker reads its pods' lists and watch events in them.

pub mod envelope;
pub mod wire;

/// Why a protobuf body could not be read; the text follows apimachinery's and gogo-protobuf's errors.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProtobufError {
    #[error("provided data does not appear to be a protobuf message, expected prefix [107 56 115 0]")]
    MissingPrefix,
    #[error("unexpected EOF")]
    UnexpectedEof,
    #[error("proto: integer overflow")]
    IntegerOverflow,
    #[error("proto: negative length found during unmarshaling")]
    InvalidLength,
    #[error("proto: illegal tag {0}")]
    IllegalTag(u64),
    #[error("proto: illegal wireType {0}")]
    IllegalWireType(u64),
    #[error("proto: wrong wireType for field {0}")]
    WrongWireType(String),
    #[error("proto: invalid UTF-8 in field {0}")]
    InvalidUtf8(String),
    #[error("proto: {0} is out of range")]
    OutOfRange(String),
    #[error("unknown watch event type {0:?}")]
    UnknownEventType(String),
    #[error("proto: exceeded maximum recursion depth")]
    TooDeep,
    #[error("invalid character in an embedded JSON document")]
    InvalidEmbeddedJson,
    #[error("no kind {1:?} is registered for version {0:?}")]
    UnknownKind(String, String),
    #[error("unexpected kind {0:?} in the envelope, expected \"DeleteOptions\"")]
    UnexpectedKind(String),
}
