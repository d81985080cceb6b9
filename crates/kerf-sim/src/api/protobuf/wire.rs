//! The protobuf wire format, read as the Go code generated for Kubernetes reads it: the same
//! checks in the same order, so a malformed body fails with the real server's message.

use super::ProtobufError;

/// Wire type of a varint.
pub const VARINT: u8 = 0;
/// Wire type of a length-delimited value.
pub const LEN: u8 = 2;

/// A cursor over one encoded message.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// A reader at the start of `buf`.
    pub fn new(buf: &'a [u8]) -> Reader<'a> {
        Reader { buf, pos: 0 }
    }

    /// A varint; bits past the 64th are dropped and an 11th byte is an overflow.
    pub fn varint(&mut self) -> Result<u64, ProtobufError> {
        let mut value = 0u64;
        let mut shift = 0u32;
        loop {
            if shift >= 64 {
                return Err(ProtobufError::IntOverflow);
            }
            let b = *self.buf.get(self.pos).ok_or(ProtobufError::UnexpectedEof)?;
            self.pos += 1;
            value |= u64::from(b & 0x7f) << shift;
            if b < 0x80 {
                return Ok(value);
            }
            shift += 7;
        }
    }

    /// A length-delimited value.
    pub fn bytes(&mut self) -> Result<&'a [u8], ProtobufError> {
        // Go reads the length into an int: past i63 it is negative.
        let len = self.varint()? as i64;
        let end = (self.pos as i64)
            .checked_add(len)
            .filter(|_| len >= 0)
            .ok_or(ProtobufError::InvalidLength)?;
        let end = usize::try_from(end).map_err(|_| ProtobufError::InvalidLength)?;
        let out = self
            .buf
            .get(self.pos..end)
            .ok_or(ProtobufError::UnexpectedEof)?;
        self.pos = end;
        Ok(out)
    }

    /// The next field's number and wire type, `None` at the end of the message. `message`
    /// is the Go type name the errors name.
    pub fn tag(&mut self, message: &str) -> Result<Option<(u32, u8)>, ProtobufError> {
        if self.pos >= self.buf.len() {
            return Ok(None);
        }
        let wire = self.varint()?;
        // Go: fieldNum := int32(wire >> 3)
        let num = (wire >> 3) as u32 as i32;
        let wire_type = (wire & 7) as u8;
        if wire_type == 4 {
            return Err(ProtobufError::EndGroup(message.to_string()));
        }
        match u32::try_from(num) {
            Ok(n) if n > 0 => Ok(Some((n, wire_type))),
            _ => Err(ProtobufError::IllegalTag {
                message: message.to_string(),
                num,
                wire,
            }),
        }
    }

    /// Skips the value of an unknown field whose tag was just read, groups included.
    pub fn skip(&mut self, first: u8) -> Result<(), ProtobufError> {
        let mut depth = 0u32;
        let mut wire_type = first;
        loop {
            match wire_type {
                VARINT => {
                    self.varint()?;
                }
                1 => self.advance(8)?,
                LEN => {
                    self.bytes()?;
                }
                3 => depth += 1,
                4 => {
                    depth = depth
                        .checked_sub(1)
                        .ok_or(ProtobufError::UnexpectedEndOfGroup)?;
                }
                5 => self.advance(4)?,
                other => return Err(ProtobufError::IllegalWireType(other)),
            }
            if depth == 0 {
                return Ok(());
            }
            if self.pos >= self.buf.len() {
                return Err(ProtobufError::UnexpectedEof);
            }
            wire_type = (self.varint()? & 7) as u8;
        }
    }

    fn advance(&mut self, n: usize) -> Result<(), ProtobufError> {
        if self.buf.len() - self.pos < n {
            return Err(ProtobufError::UnexpectedEof);
        }
        self.pos += n;
        Ok(())
    }
}

/// Splits a packed run of varints.
pub fn packed(buf: &[u8]) -> Result<Vec<u64>, ProtobufError> {
    let mut r = Reader::new(buf);
    let mut out = Vec::new();
    while r.pos < buf.len() {
        out.push(r.varint()?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_decode_and_overflow_like_the_go_reader() {
        assert_eq!(Reader::new(&[0x96, 0x01]).varint().ok(), Some(150));
        let eleven = [0xff; 11];
        assert_eq!(
            Reader::new(&eleven).varint().map_err(|e| e.to_string()),
            Err("proto: integer overflow".to_string())
        );
        assert_eq!(
            Reader::new(&[0x80]).varint().map_err(|e| e.to_string()),
            Err("unexpected EOF".to_string())
        );
    }

    #[test]
    fn lengths_past_the_end_or_negative_are_refused() {
        assert_eq!(
            Reader::new(&[0x05, b'a'])
                .bytes()
                .map_err(|e| e.to_string()),
            Err("unexpected EOF".to_string())
        );
        let negative = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01];
        assert_eq!(
            Reader::new(&negative).bytes().map_err(|e| e.to_string()),
            Err("proto: negative length found during unmarshaling".to_string())
        );
    }

    #[test]
    fn tags_of_field_zero_and_end_groups_are_refused() {
        assert_eq!(
            Reader::new(&[0x02]).tag("Pod").map_err(|e| e.to_string()),
            Err("proto: Pod: illegal tag 0 (wire type 2)".to_string())
        );
        assert_eq!(
            Reader::new(&[0x0c]).tag("Pod").map_err(|e| e.to_string()),
            Err("proto: Pod: wiretype end group for non-group".to_string())
        );
    }

    #[test]
    fn unknown_fields_are_skipped_groups_included() {
        // field 1 start group { field 2 varint 1 } end group, then field 3 varint 7
        let buf = [0x0b, 0x10, 0x01, 0x0c, 0x18, 0x07];
        let mut r = Reader::new(&buf);
        let (_, wt) = r.tag("X").ok().flatten().unwrap_or_default();
        assert!(r.skip(wt).is_ok());
        assert_eq!(r.tag("X").ok().flatten(), Some((3, VARINT)));
        assert_eq!(r.varint().ok(), Some(7));
        let mut r = Reader::new(&[0x0e]);
        let (_, wt) = r.tag("X").ok().flatten().unwrap_or_default();
        assert_eq!(
            r.skip(wt).map_err(|e| e.to_string()),
            Err("proto: illegal wireType 6".to_string())
        );
    }
}
