//! gRPC over HTTP/2: the little of it this SDK needs, on the h2 crate (Debian packages no gRPC
//! crate). The wire contract, from gRPC's PROTOCOL-HTTP2.md:
//!
//! - A call is one HTTP/2 stream: a POST of `/package.Service/Method` with `content-type:
//!   application/grpc` and `te: trailers`.
//! - Each message, both ways, is a 5-byte prefix (a compression flag, 0 here, and the length as
//!   a big-endian u32) and then that many bytes of protobuf. HTTP/2 DATA frames split and join
//!   messages freely: [`MessageDecoder`] reassembles them, and refuses a length over its cap
//!   before it sizes anything by it.
//! - The call's outcome is `grpc-status` (and `grpc-message`, percent-encoded) in the trailers,
//!   or in the headers alone ("trailers-only") when the server fails before any message.
//!
//! Nothing here knows Airlock: [`Channel`] makes calls by path, and the rest of the crate
//! turns their messages into its own types.

use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use h2::client::{ResponseFuture, SendRequest};
use h2::{RecvStream, SendStream};
use http::{HeaderMap, HeaderValue, Method, Request};
use prost::Message;

use crate::error::{Code, Error};

/// The largest message this client accepts: airlockd sends output in pieces of at most 4 MiB,
/// and the other SDKs allow 16 MiB.
pub(crate) const MAX_MESSAGE: usize = 16 << 20;

const PREFIX: usize = 5;

/// A call's outcome that is not OK, before the crate makes an [`Error`] of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Status {
    pub code: Code,
    pub message: String,
}

impl Status {
    pub fn new(code: Code, message: impl Into<String>) -> Status {
        Status { code, message: message.into() }
    }
}

impl From<Status> for Error {
    fn from(s: Status) -> Error {
        Error::from_status(s.code, s.message)
    }
}

/// One message framed for the wire: the prefix, then the encoded message.
pub(crate) fn encode<M: Message>(message: &M) -> Bytes {
    let len = message.encoded_len();
    let mut out = BytesMut::with_capacity(PREFIX + len);
    out.put_u8(0);
    out.put_u32(len as u32);
    message.encode(&mut out).expect("BytesMut grows as needed");
    out.freeze()
}

/// Reassembles messages from a stream's DATA frames, however they were split.
pub(crate) struct MessageDecoder {
    buffer: BytesMut,
    max: usize,
}

impl MessageDecoder {
    pub fn new(max: usize) -> MessageDecoder {
        MessageDecoder { buffer: BytesMut::new(), max }
    }

    /// Adds the bytes of one DATA frame.
    pub fn push(&mut self, data: &[u8]) {
        self.buffer.extend_from_slice(data);
    }

    /// The next whole message, if the bytes so far hold one. A compressed message (which this
    /// client never asks for) or one over the cap ends the call.
    pub fn next_message(&mut self) -> Result<Option<Bytes>, Status> {
        if self.buffer.len() < PREFIX {
            return Ok(None);
        }
        let flag = self.buffer[0];
        let len =
            u32::from_be_bytes([self.buffer[1], self.buffer[2], self.buffer[3], self.buffer[4]]) as usize;
        if flag != 0 {
            return Err(Status::new(
                Code::Internal,
                format!("airlockd sent a message with compression flag {} (none was asked for)", flag),
            ));
        }
        if len > self.max {
            return Err(Status::new(
                Code::ResourceExhausted,
                format!("airlockd sent a message of {} bytes, over this client's limit of {}", len, self.max),
            ));
        }
        if self.buffer.len() < PREFIX + len {
            // Room for the rest, now that the length is known to be sane.
            self.buffer.reserve(PREFIX + len - self.buffer.len());
            return Ok(None);
        }
        self.buffer.advance(PREFIX);
        Ok(Some(self.buffer.split_to(len).freeze()))
    }

    /// Checks that the stream did not end inside a message.
    pub fn finish(&self) -> Result<(), Status> {
        if self.buffer.is_empty() {
            Ok(())
        } else {
            Err(Status::new(
                Code::Internal,
                format!("the answer ended inside a message ({} bytes left over)", self.buffer.len()),
            ))
        }
    }
}

/// `grpc-message` is percent-encoded UTF-8.
fn percent_decode(value: &[u8]) -> String {
    let hex = |b: u8| (b as char).to_digit(16);
    let mut out = Vec::with_capacity(value.len());
    let mut i = 0;
    while i < value.len() {
        if value[i] == b'%' && i + 2 < value.len() {
            if let (Some(h), Some(l)) = (hex(value[i + 1]), hex(value[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(value[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The status in a header block, if it has one; `None` for a block without `grpc-status`.
pub(crate) fn status_of(headers: &HeaderMap) -> Option<Result<(), Status>> {
    let value = headers.get("grpc-status")?;
    let code = value
        .to_str()
        .ok()
        .and_then(|s| s.trim().parse::<i32>().ok())
        .map(Code::from_i32)
        .unwrap_or(Code::Unknown);
    if code == Code::Ok {
        return Some(Ok(()));
    }
    let message = headers.get("grpc-message").map(|m| percent_decode(m.as_bytes())).unwrap_or_default();
    Some(Err(Status::new(code, message)))
}

/// The status of an HTTP answer that is not gRPC's (a proxy, a wrong port), as gRPC maps it.
fn status_of_http(status: http::StatusCode) -> Status {
    let code = match status.as_u16() {
        400 => Code::Internal,
        401 => Code::Unauthenticated,
        403 => Code::PermissionDenied,
        404 => Code::Unimplemented,
        429 | 502 | 503 | 504 => Code::Unavailable,
        _ => Code::Unknown,
    };
    Status::new(code, format!("airlockd's address answered HTTP {} rather than gRPC", status))
}

/// An h2 failure as a status: a reset stream, or a lost connection.
fn status_of_h2(e: h2::Error) -> Status {
    match e.reason() {
        Some(h2::Reason::CANCEL) => Status::new(Code::Cancelled, "the call was cancelled"),
        Some(h2::Reason::REFUSED_STREAM) => {
            Status::new(Code::Unavailable, "airlockd refused the call (it may be shutting down)")
        }
        Some(h2::Reason::ENHANCE_YOUR_CALM) => {
            Status::new(Code::ResourceExhausted, "airlockd asked this client to slow down")
        }
        Some(h2::Reason::NO_ERROR) if e.is_go_away() => {
            Status::new(Code::Unavailable, "airlockd closed the connection (it may be restarting)")
        }
        _ if e.is_io() || e.is_go_away() => {
            Status::new(Code::Unavailable, format!("lost the connection to airlockd: {}", e))
        }
        _ => Status::new(Code::Internal, format!("HTTP/2: {}", e)),
    }
}

/// A connection to airlockd that makes calls, each its own HTTP/2 stream. Cheap to clone;
/// the connection closes once every clone and every call is gone.
#[derive(Clone)]
pub(crate) struct Channel {
    send: SendRequest<Bytes>,
    authority: String,
    scheme: &'static str,
}

impl Channel {
    /// HTTP/2 over `io` (a Unix socket, or TLS over TCP); the connection runs as a task on the
    /// current tokio runtime.
    pub async fn handshake<T>(io: T, authority: String, tls: bool) -> Result<Channel, Status>
    where
        T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        let (send, connection) = h2::client::Builder::new()
            // Large windows and frames: output streams at the link's speed rather than the
            // 64 KiB of HTTP/2's defaults.
            .initial_window_size(4 << 20)
            .initial_connection_window_size(16 << 20)
            .max_frame_size(1 << 20)
            .handshake(io)
            .await
            .map_err(status_of_h2)?;
        tokio::spawn(async move {
            // Its end (airlockd gone, or every handle dropped) shows in the calls.
            let _ = connection.await;
        });
        Ok(Channel { send, authority, scheme: if tls { "https" } else { "http" } })
    }

    /// Opens a call of `path` ("/airlock.v1.Sessions/Create").
    async fn open(&self, path: &str) -> Result<(SendStream<Bytes>, ResponseFuture), Status> {
        let uri = format!("{}://{}{}", self.scheme, self.authority, path);
        let mut request =
            Request::builder().method(Method::POST).uri(uri).body(()).map_err(|e| {
                Status::new(Code::Internal, format!("cannot make a request for {}: {}", path, e))
            })?;
        let headers = request.headers_mut();
        headers.insert("content-type", HeaderValue::from_static("application/grpc"));
        headers.insert("te", HeaderValue::from_static("trailers"));
        headers.insert(
            "user-agent",
            HeaderValue::from_static(concat!("airlock-rust/", env!("CARGO_PKG_VERSION"))),
        );
        let mut send = self.send.clone().ready().await.map_err(status_of_h2)?;
        let (response, stream) = send.send_request(request, false).map_err(status_of_h2)?;
        Ok((stream, response))
    }

    /// A call with one message each way.
    pub async fn unary<Q: Message, R: Message + Default>(
        &self,
        path: &str,
        request: &Q,
    ) -> Result<R, Status> {
        let mut stream = self.server_streaming::<Q, R>(path, request).await?;
        match stream.message().await? {
            Some(reply) => {
                // The status that follows it decides.
                if let Some(extra) = stream.message().await? {
                    drop(extra);
                    return Err(Status::new(
                        Code::Internal,
                        format!("{} answered more than one message", path),
                    ));
                }
                Ok(reply)
            }
            None => Err(Status::new(Code::Internal, format!("{} answered OK without a message", path))),
        }
    }

    /// A call with one request message and a stream of answers.
    pub async fn server_streaming<Q: Message, R: Message + Default>(
        &self,
        path: &str,
        request: &Q,
    ) -> Result<Responses<R>, Status> {
        let (mut requests, responses) = self.streaming::<Q, R>(path).await?;
        let mut responses = responses;
        if let Err(e) = requests.send_last(request).await {
            return Err(responses.failure(e).await);
        }
        Ok(responses)
    }

    /// A call with a stream of requests (and one answer or a stream of them).
    pub async fn streaming<Q: Message, R: Message + Default>(
        &self,
        path: &str,
    ) -> Result<(Requests<Q>, Responses<R>), Status> {
        let (stream, response) = self.open(path).await?;
        Ok((
            Requests { stream, closed: false, _message: PhantomData },
            Responses {
                state: State::Waiting(response),
                decoder: MessageDecoder::new(MAX_MESSAGE),
                _message: PhantomData,
            },
        ))
    }
}

/// The sending half of a call. Dropping both halves before the call ends cancels it
/// (RST_STREAM CANCEL).
pub(crate) struct Requests<Q> {
    stream: SendStream<Bytes>,
    closed: bool,
    _message: PhantomData<fn(Q)>,
}

impl<Q: Message> Requests<Q> {
    /// Sends a message, waiting while the server's flow-control window is full (so a large
    /// upload is never all in memory). An error here means the call ended: its status is in
    /// the responses (see [`Responses::failure`]).
    pub async fn send(&mut self, message: &Q) -> Result<(), Status> {
        self.send_bytes(encode(message), false).await
    }

    /// Sends a message and ends the request stream with it.
    pub async fn send_last(&mut self, message: &Q) -> Result<(), Status> {
        self.send_bytes(encode(message), true).await
    }

    /// Ends the request stream (a half-close); the server answers on. Idempotent.
    pub fn close(&mut self) {
        if !self.closed {
            self.closed = true;
            // A stream the server already ended cannot be closed: nothing to do then.
            let _ = self.stream.send_data(Bytes::new(), true);
        }
    }

    /// Cancels the call (RST_STREAM CANCEL) unless it has ended.
    pub fn cancel(&mut self) {
        self.closed = true;
        self.stream.send_reset(h2::Reason::CANCEL);
    }

    async fn send_bytes(&mut self, mut data: Bytes, end: bool) -> Result<(), Status> {
        if self.closed {
            return Err(Status::new(Code::Internal, "the request stream is closed"));
        }
        while !data.is_empty() {
            self.stream.reserve_capacity(data.len());
            let granted = match Capacity(&mut self.stream).await {
                Some(Ok(n)) => n,
                Some(Err(e)) => return Err(status_of_h2(e)),
                None => return Err(Status::new(Code::Unavailable, "the call ended while sending")),
            };
            if granted == 0 {
                continue;
            }
            let piece = data.split_to(granted.min(data.len()));
            let last = end && data.is_empty();
            self.stream.send_data(piece, last).map_err(status_of_h2)?;
        }
        if end {
            self.closed = true;
        }
        Ok(())
    }
}

/// Waits until the stream may send more (h2's `poll_capacity`).
struct Capacity<'a>(&'a mut SendStream<Bytes>);

impl Future for Capacity<'_> {
    type Output = Option<Result<usize, h2::Error>>;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.0.poll_capacity(cx)
    }
}

enum State {
    Waiting(ResponseFuture),
    Body(RecvStream),
    Done(Result<(), Status>),
}

/// The receiving half of a call: its messages, then its status.
pub(crate) struct Responses<R> {
    state: State,
    decoder: MessageDecoder,
    _message: PhantomData<fn() -> R>,
}

impl<R: Message + Default> Responses<R> {
    /// The next message; `None` once the call ended OK; the call's status if it did not.
    pub async fn message(&mut self) -> Result<Option<R>, Status> {
        match self.next_bytes().await? {
            Some(bytes) => R::decode(bytes).map(Some).map_err(|e| {
                let status = Status::new(
                    Code::Internal,
                    format!("airlockd sent a message this SDK cannot read: {}", e),
                );
                self.state = State::Done(Err(status.clone()));
                status
            }),
            None => Ok(None),
        }
    }

    /// The status of a call whose sending failed with `send_error`: the server's, once it
    /// gives it (it usually ended the call for a reason), else the send error.
    pub async fn failure(&mut self, send_error: Status) -> Status {
        loop {
            match self.next_bytes().await {
                Ok(Some(_)) => continue,
                Ok(None) => return send_error,
                Err(status) => return status,
            }
        }
    }

    async fn next_bytes(&mut self) -> Result<Option<Bytes>, Status> {
        loop {
            match &mut self.state {
                State::Done(result) => return result.clone().map(|()| None),
                State::Waiting(response) => {
                    let response = match response.await {
                        Ok(r) => r,
                        Err(e) => return self.end(Err(status_of_h2(e))),
                    };
                    let (parts, body) = response.into_parts();
                    // Trailers-only: the status in the headers, no body.
                    if let Some(status) = status_of(&parts.headers) {
                        return self.end(status);
                    }
                    if parts.status != http::StatusCode::OK {
                        return self.end(Err(status_of_http(parts.status)));
                    }
                    let grpc = parts
                        .headers
                        .get("content-type")
                        .and_then(|v| v.to_str().ok())
                        .map_or(false, |v| v.starts_with("application/grpc"));
                    if !grpc {
                        return self.end(Err(Status::new(
                            Code::Unknown,
                            "airlockd's address answered with something other than gRPC",
                        )));
                    }
                    self.state = State::Body(body);
                }
                State::Body(body) => {
                    match self.decoder.next_message() {
                        Ok(Some(message)) => return Ok(Some(message)),
                        Ok(None) => {}
                        Err(status) => return self.end(Err(status)),
                    }
                    match body.data().await {
                        Some(Ok(data)) => {
                            // The window opens again as this client takes the bytes: the
                            // server runs no further ahead than one message.
                            let _ = body.flow_control().release_capacity(data.len());
                            self.decoder.push(&data);
                        }
                        Some(Err(e)) => return self.end(Err(status_of_h2(e))),
                        None => {
                            if let Err(status) = self.decoder.finish() {
                                return self.end(Err(status));
                            }
                            let status = match body.trailers().await {
                                Ok(Some(trailers)) => status_of(&trailers).unwrap_or_else(|| {
                                    Err(Status::new(
                                        Code::Internal,
                                        "airlockd's answer ended without a gRPC status",
                                    ))
                                }),
                                Ok(None) => Err(Status::new(
                                    Code::Internal,
                                    "airlockd's answer ended without a gRPC status",
                                )),
                                Err(e) => Err(status_of_h2(e)),
                            };
                            return self.end(status);
                        }
                    }
                }
            }
        }
    }

    fn end(&mut self, result: Result<(), Status>) -> Result<Option<Bytes>, Status> {
        self.state = State::Done(result.clone());
        result.map(|()| None)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    fn framed(payload: &[u8]) -> Vec<u8> {
        let mut out = vec![0u8];
        out.extend_from_slice(&(payload.len() as u32).to_be_bytes());
        out.extend_from_slice(payload);
        out
    }

    #[test]
    fn messages_split_and_joined_across_frames_come_out_whole() {
        let mut wire = framed(b"first");
        wire.extend(framed(b""));
        wire.extend(framed(&vec![7u8; 100_000]));
        // Every split point, in pieces of 1, 3 and 4096 bytes.
        for piece in [1usize, 3, 4096] {
            let mut d = MessageDecoder::new(MAX_MESSAGE);
            let mut got = Vec::new();
            for chunk in wire.chunks(piece) {
                d.push(chunk);
                while let Some(m) = d.next_message().unwrap() {
                    got.push(m);
                }
            }
            d.finish().unwrap();
            assert_eq!(got.len(), 3, "pieces of {}", piece);
            assert_eq!(&got[0][..], b"first");
            assert!(got[1].is_empty());
            assert_eq!(got[2].len(), 100_000);
            assert!(got[2].iter().all(|&b| b == 7));
        }
    }

    #[test]
    fn a_length_over_the_cap_is_refused_before_anything_is_sized_by_it() {
        let mut d = MessageDecoder::new(1024);
        d.push(&[0, 0xff, 0xff, 0xff, 0xff]);
        let e = d.next_message().unwrap_err();
        assert_eq!(e.code, Code::ResourceExhausted);
        assert!(d.buffer.capacity() < 1 << 20, "buffer grew to {}", d.buffer.capacity());
        let mut at_cap = MessageDecoder::new(4);
        at_cap.push(&framed(b"four"));
        assert_eq!(&at_cap.next_message().unwrap().unwrap()[..], b"four");
        let mut over = MessageDecoder::new(4);
        over.push(&framed(b"fives"));
        assert_eq!(over.next_message().unwrap_err().code, Code::ResourceExhausted);
    }

    #[test]
    fn a_compressed_message_and_a_stream_ending_inside_a_message_are_errors() {
        let mut d = MessageDecoder::new(MAX_MESSAGE);
        d.push(&[1, 0, 0, 0, 1, b'x']);
        assert_eq!(d.next_message().unwrap_err().code, Code::Internal);
        let mut cut = MessageDecoder::new(MAX_MESSAGE);
        cut.push(&framed(b"whole")[..7]);
        assert_eq!(cut.next_message().unwrap(), None);
        assert_eq!(cut.finish().unwrap_err().code, Code::Internal);
    }

    #[test]
    fn encode_writes_the_prefix_the_decoder_reads() {
        let message = crate::pb::GetSessionRequest { id: "0123456789ab".into() };
        let wire = encode(&message);
        assert_eq!(wire[0], 0);
        assert_eq!(u32::from_be_bytes([wire[1], wire[2], wire[3], wire[4]]) as usize, wire.len() - 5);
        let mut d = MessageDecoder::new(MAX_MESSAGE);
        d.push(&wire);
        let back = crate::pb::GetSessionRequest::decode(d.next_message().unwrap().unwrap()).unwrap();
        assert_eq!(back, message);
    }

    #[test]
    fn statuses_come_from_trailers_or_headers_alone() {
        let mut h = HeaderMap::new();
        assert_eq!(status_of(&h), None);
        h.insert("grpc-status", HeaderValue::from_static("0"));
        assert_eq!(status_of(&h), Some(Ok(())));
        h.insert("grpc-status", HeaderValue::from_static("5"));
        h.insert("grpc-message", HeaderValue::from_static("no session 0123456789ab%3A caf%C3%A9 100%"));
        assert_eq!(
            status_of(&h),
            Some(Err(Status::new(Code::NotFound, "no session 0123456789ab: café 100%")))
        );
        h.insert("grpc-status", HeaderValue::from_static("banana"));
        assert_eq!(status_of(&h).unwrap().unwrap_err().code, Code::Unknown);
        assert_eq!(status_of_http(http::StatusCode::SERVICE_UNAVAILABLE).code, Code::Unavailable);
        assert_eq!(status_of_http(http::StatusCode::NOT_FOUND).code, Code::Unimplemented);
    }

    /// A channel to an in-process HTTP/2 server that answers the one call it gets with
    /// `answer`, as a gRPC server might (or might not).
    pub(crate) async fn channel_to<F, Fut>(answer: F) -> Channel
    where
        F: FnOnce(Request<RecvStream>, h2::server::SendResponse<Bytes>) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let (client_io, server_io) = tokio::io::duplex(1 << 20);
        tokio::spawn(async move {
            let mut connection = h2::server::handshake(server_io).await.unwrap();
            if let Some(Ok((request, respond))) = connection.accept().await {
                tokio::spawn(answer(request, respond));
            }
            while connection.accept().await.is_some() {}
        });
        Channel::handshake(client_io, "localhost".into(), false).await.unwrap()
    }

    pub(crate) fn grpc_headers(status: Option<i32>, message: &str) -> http::Response<()> {
        let mut r = http::Response::builder().status(200).header("content-type", "application/grpc");
        if let Some(code) = status {
            r = r.header("grpc-status", code.to_string()).header("grpc-message", message);
        }
        r.body(()).unwrap()
    }

    pub(crate) fn trailers(code: i32, message: &str) -> HeaderMap {
        let mut t = HeaderMap::new();
        t.insert("grpc-status", HeaderValue::from_str(&code.to_string()).unwrap());
        t.insert("grpc-message", HeaderValue::from_str(message).unwrap());
        t
    }

    type Reply = crate::pb::Session;

    async fn call(channel: &Channel) -> Result<Reply, Status> {
        channel
            .unary("/airlock.v1.Sessions/Get", &crate::pb::GetSessionRequest { id: "0123456789ab".into() })
            .await
    }

    #[tokio::test]
    async fn a_trailers_only_answer_is_the_calls_status() {
        let channel = channel_to(|_request, mut respond| async move {
            respond.send_response(grpc_headers(Some(5), "no session 0123456789ab"), true).unwrap();
        })
        .await;
        assert_eq!(call(&channel).await.unwrap_err(), Status::new(Code::NotFound, "no session 0123456789ab"));
    }

    #[tokio::test]
    async fn a_message_in_one_byte_frames_arrives_whole_and_the_request_as_sent() {
        let reply = Reply { id: "0123456789ab".into(), hostname: "h".repeat(3000), ..Default::default() };
        let wire = encode(&reply);
        let channel = channel_to(move |request, mut respond| async move {
            assert_eq!(request.uri().path(), "/airlock.v1.Sessions/Get");
            assert_eq!(request.headers()["content-type"], "application/grpc");
            assert_eq!(request.headers()["te"], "trailers");
            let mut body = request.into_body();
            let mut got = MessageDecoder::new(MAX_MESSAGE);
            while let Some(data) = body.data().await {
                let data = data.unwrap();
                let _ = body.flow_control().release_capacity(data.len());
                got.push(&data);
            }
            let asked = crate::pb::GetSessionRequest::decode(got.next_message().unwrap().unwrap()).unwrap();
            assert_eq!(asked.id, "0123456789ab");
            let mut send = respond.send_response(grpc_headers(None, ""), false).unwrap();
            for byte in wire.iter() {
                send.send_data(Bytes::copy_from_slice(&[*byte]), false).unwrap();
            }
            send.send_trailers(trailers(0, "")).unwrap();
        })
        .await;
        assert_eq!(call(&channel).await.unwrap(), reply);
    }

    #[tokio::test]
    async fn a_message_over_the_cap_ends_the_call() {
        let channel = channel_to(|_request, mut respond| async move {
            let mut send = respond.send_response(grpc_headers(None, ""), false).unwrap();
            let mut prefix = vec![0u8];
            prefix.extend_from_slice(&((MAX_MESSAGE + 1) as u32).to_be_bytes());
            send.send_data(Bytes::from(prefix), false).unwrap();
            // The rest never comes: the client must refuse on the prefix alone.
            std::future::pending::<()>().await;
        })
        .await;
        assert_eq!(call(&channel).await.unwrap_err().code, Code::ResourceExhausted);
    }

    #[tokio::test]
    async fn an_answer_without_a_status_or_of_the_wrong_kind_is_an_error() {
        let channel = channel_to(|_request, mut respond| async move {
            let mut send = respond.send_response(grpc_headers(None, ""), false).unwrap();
            send.send_data(encode(&Reply::default()), true).unwrap();
        })
        .await;
        assert_eq!(call(&channel).await.unwrap_err().code, Code::Internal);
        let channel = channel_to(|_request, mut respond| async move {
            let html =
                http::Response::builder().status(503).header("content-type", "text/html").body(()).unwrap();
            respond.send_response(html, true).unwrap();
        })
        .await;
        assert_eq!(call(&channel).await.unwrap_err().code, Code::Unavailable);
    }

    #[tokio::test]
    async fn a_server_that_fails_a_stream_early_gives_its_reason_to_the_sender() {
        let channel = channel_to(|_request, mut respond| async move {
            // Refuses at once, without reading the request (as WriteFileStream does for a
            // session that is not there), and resets the rest.
            let mut send = respond.send_response(grpc_headers(None, ""), false).unwrap();
            send.send_trailers(trailers(5, "no session 0123456789ab")).unwrap();
        })
        .await;
        let (mut requests, mut responses) = channel
            .streaming::<crate::pb::WriteFileChunk, crate::pb::WriteFileResponse>(
                "/airlock.v1.Sessions/WriteFileStream",
            )
            .await
            .unwrap();
        let piece = crate::pb::WriteFileChunk { data: Bytes::from(vec![1u8; 1 << 20]), ..Default::default() };
        let mut status = None;
        for _ in 0..64 {
            if let Err(e) = requests.send(&piece).await {
                status = Some(responses.failure(e).await);
                break;
            }
        }
        let status = match status {
            Some(s) => s,
            None => {
                requests.close();
                responses.message().await.unwrap_err()
            }
        };
        assert_eq!(status, Status::new(Code::NotFound, "no session 0123456789ab"));
    }

    #[tokio::test]
    async fn a_lost_connection_is_unavailable() {
        let (client_io, server_io) = tokio::io::duplex(1 << 16);
        let channel = Channel::handshake(client_io, "localhost".into(), false).await.unwrap();
        drop(server_io);
        let status = call(&channel).await.unwrap_err();
        assert_eq!(status.code, Code::Unavailable, "{:?}", status);
    }
}
