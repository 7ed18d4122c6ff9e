//! A bounds-checked reader of the protobuf wire format: every malformed input is an error, never a panic.

use crate::ProtobufError;

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

    /// A reader over a packed run of numbers (its fields carry no keys).
    pub fn packed(run: &'a [u8]) -> Self {
        Self { rest: run }
    }

    /// The next number of a packed run of the given wire type, `None` at its end.
    pub fn next_packed(&mut self, wire_type: u8) -> Result<Option<WireValue<'a>>, ProtobufError> {
        if self.rest.is_empty() {
            return Ok(None);
        }
        Ok(Some(match wire_type {
            1 => WireValue::Fixed64(u64::from_le_bytes(self.take_array::<8>()?)),
            5 => WireValue::Fixed32(u32::from_le_bytes(self.take_array::<4>()?)),
            _ => WireValue::Varint(self.varint()?),
        }))
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
    pub fn as_varint(self, field: &str) -> Result<u64, ProtobufError> {
        match self {
            WireValue::Varint(v) => Ok(v),
            _ => Err(ProtobufError::WrongWireType(field.to_string())),
        }
    }

    pub fn as_bytes(self, field: &str) -> Result<&'a [u8], ProtobufError> {
        match self {
            WireValue::Bytes(b) => Ok(b),
            _ => Err(ProtobufError::WrongWireType(field.to_string())),
        }
    }

    /// The string, borrowed from the message: for a field read only to be looked at.
    pub fn as_str(self, field: &str) -> Result<&'a str, ProtobufError> {
        let bytes = self.as_bytes(field)?;
        std::str::from_utf8(bytes).map_err(|_| ProtobufError::InvalidUtf8(field.to_string()))
    }

    pub fn as_string(self, field: &str) -> Result<String, ProtobufError> {
        self.as_str(field).map(str::to_owned)
    }
}

/// Writes fields in the wire format, in the order given (gogo writes them by field number).
#[derive(Debug, Default)]
pub struct Writer {
    out: Vec<u8>,
}

impl Writer {
    pub fn into_bytes(self) -> Vec<u8> {
        self.out
    }

    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.out.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.out.push(v as u8);
    }

    fn key(&mut self, tag: u32, wire_type: u8) {
        self.varint((u64::from(tag) << 3) | u64::from(wire_type));
    }

    pub fn varint_field(&mut self, tag: u32, v: u64) {
        self.key(tag, 0);
        self.varint(v);
    }

    pub fn fixed64_field(&mut self, tag: u32, v: u64) {
        self.key(tag, 1);
        self.out.extend_from_slice(&v.to_le_bytes());
    }

    pub fn fixed32_field(&mut self, tag: u32, v: u32) {
        self.key(tag, 5);
        self.out.extend_from_slice(&v.to_le_bytes());
    }

    pub fn bytes(&mut self, tag: u32, bytes: &[u8]) {
        self.key(tag, 2);
        self.varint(bytes.len() as u64);
        self.out.extend_from_slice(bytes);
    }
}
