//! A bounds-checked reader of the protobuf wire format: every malformed input is an error, never a panic.

use super::ProtobufError;

/// A field's wire-level value, borrowed from the message being read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WireValue<'a> {
    Varint(u64),
    Fixed64(u64),
    Bytes(&'a [u8]),
    Fixed32(u32),
}

/// Iterates over the (field number, value) pairs of one message.
pub struct FieldReader<'a> {
    rest: &'a [u8],
}

impl<'a> FieldReader<'a> {
    pub fn new(message: &'a [u8]) -> Self {
        Self { rest: message }
    }

    /// The next field, `None` at the end of the message.
    pub fn next_field(&mut self) -> Result<Option<(u32, WireValue<'a>)>, ProtobufError> {
        if self.rest.is_empty() {
            return Ok(None);
        }
        let key = self.varint()?;
        let number = u32::try_from(key >> 3).map_err(|_| ProtobufError::IllegalTag(key))?;
        if number == 0 {
            return Err(ProtobufError::IllegalTag(key));
        }
        let value = match key & 7 {
            0 => WireValue::Varint(self.varint()?),
            1 => WireValue::Fixed64(u64::from_le_bytes(self.take_array::<8>()?)),
            2 => {
                let len = usize::try_from(self.varint()?).map_err(|_| ProtobufError::InvalidLength)?;
                WireValue::Bytes(self.take(len)?)
            }
            5 => WireValue::Fixed32(u32::from_le_bytes(self.take_array::<4>()?)),
            other => return Err(ProtobufError::IllegalWireType(other)),
        };
        Ok(Some((number, value)))
    }

    fn varint(&mut self) -> Result<u64, ProtobufError> {
        let mut value: u64 = 0;
        for (i, byte) in self.rest.iter().enumerate() {
            if i == 10 {
                return Err(ProtobufError::IntegerOverflow);
            }
            value |= u64::from(byte & 0x7f) << (7 * i);
            if byte & 0x80 == 0 {
                self.rest = &self.rest[i + 1..];
                return Ok(value);
            }
        }
        Err(ProtobufError::UnexpectedEof)
    }

    fn take(&mut self, len: usize) -> Result<&'a [u8], ProtobufError> {
        if len > self.rest.len() {
            return Err(ProtobufError::UnexpectedEof);
        }
        let (head, tail) = self.rest.split_at(len);
        self.rest = tail;
        Ok(head)
    }

    fn take_array<const N: usize>(&mut self) -> Result<[u8; N], ProtobufError> {
        let bytes = self.take(N)?;
        let mut out = [0u8; N];
        out.copy_from_slice(bytes);
        Ok(out)
    }
}

impl<'a> WireValue<'a> {
    pub fn as_varint(self, field: &'static str) -> Result<u64, ProtobufError> {
        match self {
            WireValue::Varint(v) => Ok(v),
            _ => Err(ProtobufError::WrongWireType(field)),
        }
    }

    pub fn as_bytes(self, field: &'static str) -> Result<&'a [u8], ProtobufError> {
        match self {
            WireValue::Bytes(b) => Ok(b),
            _ => Err(ProtobufError::WrongWireType(field)),
        }
    }

    pub fn as_string(self, field: &'static str) -> Result<String, ProtobufError> {
        let bytes = self.as_bytes(field)?;
        String::from_utf8(bytes.to_vec()).map_err(|_| ProtobufError::InvalidUtf8(field))
    }
}
