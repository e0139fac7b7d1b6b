//! A session's files, through its guest agent, of any size, streamed both ways.

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::error::{Error, Result};
use crate::grpc::{Requests, Responses};
use crate::pb;
use crate::session::Session;

/// The most airlockd takes in one message of a file.
const FILE_PIECE: usize = 1 << 20;

fn guest_path(path: &[u8]) -> Result<Bytes> {
    if !path.starts_with(b"/") {
        return Err(Error::invalid("give an absolute path in the guest, like /root/data.txt"));
    }
    Ok(Bytes::copy_from_slice(path))
}

/// A session's files ([`Session::files`]). A paused session is resumed first.
pub struct Files<'a> {
    session: &'a Session,
}

impl Session {
    /// The session's files.
    pub fn files(&self) -> Files<'_> {
        Files { session: self }
    }
}

impl Files<'_> {
    /// Creates or replaces a file (and its missing directories) with `data` and the permission
    /// bits `mode` (0: 0o644); returns the bytes written.
    pub async fn write(&self, path: impl AsRef<[u8]>, data: impl Into<Bytes>, mode: u32) -> Result<u64> {
        let data: Bytes = data.into();
        self.write_from(path, &data[..], mode).await
    }

    /// Creates or replaces a file with everything `reader` gives until its end, sent as it is
    /// read (in 1 MiB pieces, at the pace airlockd takes them), and returns the bytes written.
    /// The file changes only once all of it is in the guest: if `reader` fails part-way, the
    /// old file stays and the reader's error comes back as [`Error::Io`].
    pub async fn write_from<R>(&self, path: impl AsRef<[u8]>, reader: R, mode: u32) -> Result<u64>
    where
        R: AsyncRead + Unpin,
    {
        let path = guest_path(path.as_ref())?;
        if mode > 0o7777 {
            return Err(Error::invalid(format!(
                "a file's mode is its permission bits, like 0o644, not {:#o}",
                mode
            )));
        }
        let (mut requests, mut responses) = self
            .session
            .client
            .channel
            .streaming::<pb::WriteFileChunk, pb::WriteFileResponse>("/airlock.v1.Sessions/WriteFileStream")
            .await?;
        let first = pb::WriteFileChunk {
            session_id: self.session.id().to_string(),
            path,
            mode,
            ..Default::default()
        };
        if let Err(e) = requests.send(&first).await {
            return Err(self.session.explain(responses.failure(e).await.into()).await);
        }
        // A stream that ends without `last` (a reader that failed) leaves the file as it was.
        let chunk = |data, _first, last| pb::WriteFileChunk { data, last, ..Default::default() };
        match upload(&mut requests, &mut responses, reader, chunk).await {
            Ok(()) => {}
            Err(e @ Error::Io(_)) => return Err(e),
            Err(e) => return Err(self.session.explain(e).await),
        }
        match one(&mut responses).await {
            Ok(reply) => Ok(reply.bytes),
            Err(e) => Err(self.session.explain(e).await),
        }
    }

    /// A file's content; [`Error::InvalidArgument`] if it is larger than `max_bytes` (0: no
    /// limit).
    pub async fn read(&self, path: impl AsRef<[u8]>, max_bytes: u64) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        let mut stream = self.read_stream(path, max_bytes).await?;
        while let Some(piece) = stream.next().await? {
            out.extend_from_slice(&piece);
        }
        Ok(out)
    }

    /// Copies a file to `writer` as the guest reads it, for files too large to hold, and
    /// returns the bytes copied. An error of the writer cancels the read ([`Error::Io`]).
    pub async fn read_to<W>(&self, path: impl AsRef<[u8]>, mut writer: W, max_bytes: u64) -> Result<u64>
    where
        W: AsyncWrite + Unpin,
    {
        let mut stream = self.read_stream(path, max_bytes).await?;
        let mut total = 0u64;
        while let Some(piece) = stream.next().await? {
            writer.write_all(&piece).await.map_err(Error::Io)?;
            total += piece.len() as u64;
        }
        writer.flush().await.map_err(Error::Io)?;
        Ok(total)
    }

    /// A file's content in pieces as the guest reads it ([`FileStream::next`]).
    pub async fn read_stream(&self, path: impl AsRef<[u8]>, max_bytes: u64) -> Result<FileStream> {
        let request = pb::ReadFileStreamRequest {
            session_id: self.session.id().to_string(),
            path: guest_path(path.as_ref())?,
            max_bytes,
        };
        match self
            .session
            .client
            .channel
            .server_streaming("/airlock.v1.Sessions/ReadFileStream", &request)
            .await
        {
            Ok(responses) => Ok(FileStream { responses, session: self.session.clone() }),
            Err(status) => Err(self.session.explain(status.into()).await),
        }
    }
}

/// A file being read ([`Files::read_stream`]); dropping it cancels the read.
pub struct FileStream {
    responses: Responses<pb::ReadFileChunk>,
    session: Session,
}

impl FileStream {
    /// The next piece; `None` after the last (an empty file has none).
    pub async fn next(&mut self) -> Result<Option<Bytes>> {
        match self.responses.message().await {
            Ok(Some(chunk)) => Ok(Some(chunk.data)),
            Ok(None) => Ok(None),
            Err(status) => Err(self.session.explain(status.into()).await),
        }
    }
}

/// Sends everything `reader` gives until its end as a call's request stream: messages that
/// `message(piece, first, last)` makes of pieces of at most 1 MiB, at the pace airlockd takes
/// them, the last one ending the stream (an empty reader makes one empty message). A reader
/// that fails part-way cancels the call, so that airlockd keeps nothing of it (every upload it
/// takes acts only on `last`), and its error comes back as [`Error::Io`]; a call that airlockd
/// ended comes back with airlockd's status.
pub(crate) async fn upload<Q, R, Rd>(
    requests: &mut Requests<Q>,
    responses: &mut Responses<R>,
    mut reader: Rd,
    mut message: impl FnMut(Bytes, bool, bool) -> Q,
) -> Result<()>
where
    Q: prost::Message,
    R: prost::Message + Default,
    Rd: AsyncRead + Unpin,
{
    let mut buffer = vec![0u8; FILE_PIECE];
    let mut first = true;
    loop {
        let n = match read_full(&mut reader, &mut buffer).await {
            Ok(n) => n,
            Err(e) => {
                requests.cancel();
                return Err(Error::Io(e));
            }
        };
        let last = n < buffer.len();
        let chunk = message(Bytes::copy_from_slice(&buffer[..n]), first, last);
        first = false;
        let sent = if last { requests.send_last(&chunk).await } else { requests.send(&chunk).await };
        if let Err(e) = sent {
            return Err(responses.failure(e).await.into());
        }
        if last {
            return Ok(());
        }
    }
}

/// Reads until `buffer` is full or the reader ends; the bytes read.
async fn read_full<R: AsyncRead + Unpin>(reader: &mut R, buffer: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buffer.len() {
        let got = reader.read(&mut buffer[n..]).await?;
        if got == 0 {
            break;
        }
        n += got;
    }
    Ok(n)
}

/// The one answer of a client-streaming call.
pub(crate) async fn one<R: prost::Message + Default>(responses: &mut Responses<R>) -> Result<R> {
    match responses.message().await? {
        Some(reply) => {
            if responses.message().await?.is_some() {
                return Err(Error::Other {
                    code: crate::Code::Internal,
                    message: "airlockd answered more than one message".to_string(),
                });
            }
            Ok(reply)
        }
        None => Err(Error::Other {
            code: crate::Code::Internal,
            message: "airlockd answered OK without a message".to_string(),
        }),
    }
}
