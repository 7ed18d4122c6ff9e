//! Protobuf responses: when a request's Accept prefers `application/vnd.kubernetes.protobuf`,
//! objects, lists and Statuses of built-in kinds are encoded in protobuf and watch streams become
//! length-prefixed `WatchEvent` frames, as kube-apiserver's negotiation does. Custom resources,
//! Tables and anything else without a protobuf message stay JSON.

use bytes::{Bytes, BytesMut};
use http::HeaderMap;
use serde_json::Value;
use tokio::sync::mpsc;

use super::{Reply, ReplyBody};
use crate::protobuf::codec::{self, encode_enveloped};
use crate::protobuf::schema::schema;
use crate::protobuf::wire::Writer;

pub const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";
const PROTOBUF_WATCH: &str = "application/vnd.kubernetes.protobuf;stream=watch";

/// What a request's Accept header asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wanted {
    Json,
    /// Protobuf first, JSON acceptable.
    Protobuf,
    /// Only protobuf (no JSON, YAML or wildcard range).
    ProtobufOnly,
}

/// Reads Accept as `runtime.NegotiateMediaType` would for the sim's three serializers: the range
/// with the highest q wins, in header order among equals; `as=` conversions (Table) are JSON.
pub fn wanted(headers: &HeaderMap) -> Wanted {
    // Only a range naming protobuf can make the answer other than JSON; most clients (kube-rs,
    // kubectl's JSON requests) name none, and are answered without parsing their ranges.
    let names_protobuf = headers
        .get_all(http::header::ACCEPT)
        .iter()
        .any(|v| v.as_bytes().windows(PROTOBUF.len()).any(|w| w.eq_ignore_ascii_case(PROTOBUF.as_bytes())));
    if !names_protobuf {
        return Wanted::Json;
    }
    wanted_by_ranges(headers)
}

/// [`wanted`] by reading every range.
fn wanted_by_ranges(headers: &HeaderMap) -> Wanted {
    let accept = headers
        .get_all(http::header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect::<Vec<_>>()
        .join(",");
    let mut ranges: Vec<(f32, bool, bool)> = Vec::new();
    for range in accept.split(',') {
        let mut parts = range.split(';').map(str::trim);
        let media = parts.next().unwrap_or("").to_ascii_lowercase();
        let mut q = 1.0f32;
        let mut converted = false;
        for param in parts {
            match param.split_once('=') {
                Some(("q", v)) => q = v.trim().parse().unwrap_or(1.0),
                Some(("as", _)) => converted = true,
                _ => {}
            }
        }
        let protobuf = media == PROTOBUF;
        let other_serializer =
            matches!(media.as_str(), "application/json" | "application/yaml" | "*/*" | "application/*" | "");
        if q > 0.0 && (protobuf || other_serializer) {
            ranges.push((q, protobuf && !converted, other_serializer || converted));
        }
    }
    let best = ranges.iter().map(|r| r.0).fold(0.0f32, f32::max);
    match ranges.iter().find(|r| r.0 == best) {
        Some((_, true, _)) if ranges.iter().all(|r| !r.2) => Wanted::ProtobufOnly,
        Some((_, true, _)) => Wanted::Protobuf,
        _ => Wanted::Json,
    }
}

/// The reply in protobuf where its body has a protobuf form; otherwise as it was.
pub fn to_protobuf(mut reply: Reply) -> Reply {
    reply.body = match reply.body {
        ReplyBody::Bytes(json, "application/json") => match encode_json(&json) {
            Some(encoded) => ReplyBody::Bytes(Bytes::from(encoded), PROTOBUF),
            None => ReplyBody::Bytes(json, "application/json"),
        },
        ReplyBody::Stream(rx, "application/json") => ReplyBody::Stream(watch_frames(rx), PROTOBUF_WATCH),
        other => other,
    };
    reply
}

fn encode_json(json: &[u8]) -> Option<Vec<u8>> {
    let value: Value = serde_json::from_slice(json).ok()?;
    encode_enveloped(schema(), &value)
}

/// Re-frames a JSON watch stream (one event per line) as protobuf `WatchEvent`s, each behind a
/// 4-byte big-endian length (the streaming serializer's `LengthDelimitedFramer`), with the object
/// enveloped in `RawExtension.raw`.
fn watch_frames(mut json_lines: mpsc::Receiver<Bytes>) -> mpsc::Receiver<Bytes> {
    let (tx, rx) = mpsc::channel(16);
    tokio::spawn(async move {
        let mut pending = BytesMut::new();
        while let Some(chunk) = json_lines.recv().await {
            pending.extend_from_slice(&chunk);
            let mut out = BytesMut::new();
            while let Some(end) = pending.iter().position(|b| *b == b'\n') {
                let line = pending.split_to(end + 1);
                if let Some(frame) = watch_frame(&line[..end]) {
                    out.extend_from_slice(&(frame.len() as u32).to_be_bytes());
                    out.extend_from_slice(&frame);
                }
            }
            if !out.is_empty() && tx.send(out.freeze()).await.is_err() {
                return;
            }
        }
    });
    rx
}

fn watch_frame(line: &[u8]) -> Option<Vec<u8>> {
    let event: Value = serde_json::from_slice(line).ok()?;
    let kind = event.get("type")?.as_str()?;
    let object = encode_enveloped(schema(), event.get("object")?)?;
    let mut raw = Writer::default();
    raw.bytes(1, &object);
    let mut frame = Writer::default();
    frame.bytes(1, kind.as_bytes());
    frame.bytes(2, &raw.into_bytes());
    Some(frame.into_bytes())
}

/// Decodes a protobuf request body into the JSON form the handlers take; errors read as the
/// create handler's `transformDecodeError` words them.
pub fn decode_body(body: &[u8], content_type: &str, kind: &str) -> Result<Value, crate::apiserver::ApiError> {
    use crate::apiserver::ApiError;
    use crate::protobuf::{ProtobufError, envelope};
    let error = match codec::decode_enveloped(schema(), body, 0) {
        Ok(v) => return Ok(v),
        // Custom resources (and kinds without a message) have no protobuf form.
        Err(ProtobufError::UnknownKind(..)) => return Err(ApiError::unsupported_media_type(content_type)),
        Err(e) => e,
    };
    match envelope::decode(body) {
        Ok(unknown) if !unknown.kind.is_empty() => {
            let version = unknown.api_version.rsplit('/').next().unwrap_or_default();
            Err(ApiError::bad_request(format!(
                "{} in version {version:?} cannot be handled as a {kind}: {error}",
                unknown.kind
            )))
        }
        _ => Err(ApiError::bad_request(format!(
            "the object provided is unrecognized (must be of type {kind}): {error} ({})",
            summarize(body)
        ))),
    }
}

/// apimachinery's `summarizeData(data, 30)`: JSON-looking text as is, anything else in hex.
fn summarize(body: &[u8]) -> String {
    const MAX: usize = 30;
    let shown = &body[..body.len().min(MAX)];
    let more = if body.len() > MAX { " ..." } else { "" };
    match body.first() {
        None => "<empty>".into(),
        Some(b'{') => format!("{}{more}", String::from_utf8_lossy(shown)),
        Some(_) => format!("{}{more}", shown.iter().map(|b| format!("{b:02x}")).collect::<String>()),
    }
}

#[cfg(test)]
mod wanted_tests {
    use super::*;

    /// The shortcut for Accept headers that name no protobuf range answers as reading the ranges.
    #[test]
    fn wanted_is_the_ranges_reading() {
        let accepts: &[&[&str]] = &[
            &[],
            &["application/json"],
            &["application/json, */*"],
            &["*/*"],
            &["application/yaml;q=0.5"],
            &["application/json;as=Table;v=v1;g=meta.k8s.io,application/json"],
            &["application/vnd.kubernetes.protobuf"],
            &["Application/VND.Kubernetes.Protobuf"],
            &["application/vnd.kubernetes.protobuf, application/json"],
            &["application/json;q=0.9, application/vnd.kubernetes.protobuf"],
            &["application/vnd.kubernetes.protobuf;q=0.5, application/json"],
            &["application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io"],
            &["application/vnd.kubernetes.protobuf;q=0"],
            &["application/json", "application/vnd.kubernetes.protobuf"],
            &["application/vnd.kubernetes.protobuf", "application/json;q=0.1"],
            &["application/vnd.kubernetes.protobuf;stream=watch"],
            &["text/plain, application/vnd.kubernetes.protobufx"],
        ];
        for values in accepts {
            let mut headers = HeaderMap::new();
            for v in *values {
                headers.append(http::header::ACCEPT, v.parse().unwrap());
            }
            assert_eq!(wanted(&headers), wanted_by_ranges(&headers), "{values:?}");
        }
        let mut protobuf = HeaderMap::new();
        protobuf.insert(http::header::ACCEPT, PROTOBUF.parse().unwrap());
        assert_eq!(wanted(&protobuf), Wanted::ProtobufOnly);
    }
}

/// The forms `/openapi/v2` is served in (kube-openapi's handler).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenApiV2 {
    Json,
    /// gnostic protobuf.
    Protobuf,
}

/// The first acceptable Accept range wins, as kube-openapi's handler (`handler/handler.go`) decides; no Accept, or a
/// wildcard, is JSON; `None` when nothing offered is acceptable (406).
pub fn openapi_v2(headers: &HeaderMap) -> Option<OpenApiV2> {
    let ranges: Vec<String> = headers
        .get_all(http::header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|r| r.split(';').next().unwrap_or("").trim().to_ascii_lowercase())
        .filter(|r| !r.is_empty())
        .collect();
    if ranges.is_empty() {
        return Some(OpenApiV2::Json);
    }
    ranges.iter().find_map(|r| match r.as_str() {
        "application/json" | "application/*" | "*/*" => Some(OpenApiV2::Json),
        crate::kubectl::OPENAPI_V2_PROTOBUF_ACCEPT => Some(OpenApiV2::Protobuf),
        _ => None,
    })
}

#[cfg(test)]
mod openapi_v2_tests {
    use super::*;

    fn accept(v: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(http::header::ACCEPT, v.parse().expect("header"));
        h
    }

    #[test]
    fn openapi_v2_forms() {
        assert_eq!(openapi_v2(&HeaderMap::new()), Some(OpenApiV2::Json));
        assert_eq!(
            openapi_v2(&accept("application/com.github.proto-openapi.spec.v2@v1.0+protobuf")),
            Some(OpenApiV2::Protobuf)
        );
        assert_eq!(openapi_v2(&accept("text/html, application/json;q=0.9")), Some(OpenApiV2::Json));
        assert_eq!(openapi_v2(&accept("application/yaml")), None);
    }
}
