//! What sessions are made from and attach: images (pulled, imported, built), volumes; the
//! live VMs; and the caller's quotas.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::io::AsyncRead;

use crate::client::Client;
use crate::error::{Code, Error, Result};
use crate::files::{one, upload};
use crate::grpc::Responses;
use crate::pb;
use crate::session::{parse_size, secret_bindings, time_ms};

/// An image airlockd has.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Image {
    pub name: String,
    pub digest: String,
    pub size: u64,
    pub created: SystemTime,
    /// What it came from: a registry reference, an archive, a build.
    pub source: String,
}

impl Image {
    fn from_wire(i: pb::Image) -> Image {
        Image {
            name: i.name,
            digest: i.digest,
            size: i.size_bytes,
            created: UNIX_EPOCH + Duration::from_secs(i.created_unix.max(0) as u64),
            source: i.source,
        }
    }
}

/// An image for [`Client::build_image`] to build from Debian packages.
#[derive(Clone, Debug, Default)]
pub struct ImageBuild {
    /// Its name in the caller's images, like "team/devbox:1".
    pub tag: String,
    /// A Debian suite: "bookworm", "trixie", ...
    pub suite: String,
    /// Debian packages besides minbase, like "python3", "git".
    pub packages: Vec<String>,
    /// npm packages: NAME or @SCOPE/NAME, optionally @VERSION (adds Node.js).
    pub npm: Vec<String>,
    /// The image's environment.
    pub env: BTreeMap<String, String>,
}

/// A Dockerfile for [`Client::build_dockerfile`] and its build's settings.
#[derive(Clone, Debug, Default)]
pub struct DockerfileBuild {
    /// The Dockerfile's text.
    pub dockerfile: String,
    /// The image's name in the caller's images, like "team/app:1".
    pub tag: String,
    /// ARG values (`--build-arg NAME=VALUE`).
    pub build_args: BTreeMap<String, String>,
    /// The stage to build (`FROM ... AS NAME`); "": the last.
    pub target: String,
    /// RUN's egress rules, as [`SessionOptions::allow`](crate::SessionOptions::allow).
    pub allow: Vec<String>,
    pub presets: Vec<String>,
    /// Run every step again.
    pub no_cache: bool,
    /// Secrets for RUN steps that have the network, as
    /// [`SessionOptions::secrets`](crate::SessionOptions::secrets): a RUN sees only the
    /// placeholder, so no value can reach a layer.
    pub secrets: BTreeMap<String, Option<Vec<u8>>>,
}

/// An image tag [`Client::remove_images`] removed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RemovedImage {
    pub name: String,
    pub digest: String,
    /// The image's files are gone.
    pub freed: bool,
    pub freed_bytes: u64,
    /// Sessions that still use it (it was kept for them).
    pub sessions: u32,
}

/// The image a build's last message carries, the lines before it given to `progress`.
async fn built(mut responses: Responses<pb::BuildProgress>, mut progress: impl FnMut(&str)) -> Result<Image> {
    while let Some(p) = responses.message().await? {
        if let Some(image) = p.image {
            return Ok(Image::from_wire(image));
        }
        progress(&p.line);
    }
    Err(Error::Other {
        code: Code::Internal,
        message: "airlockd ended the build without the image".to_string(),
    })
}

/// The caller's quotas ([`Client::quota`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Quota {
    /// Whose they are: "uid:1000", "cert:NAME", ...
    pub tenant: String,
    pub items: Vec<QuotaItem>,
}

/// One quota: its limit and what the caller uses of it now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QuotaItem {
    /// "sessions", "running", "vcpus", "memory", "disk", "logs", "forks", "pull".
    pub name: String,
    pub limit: u64,
    /// Per-request quotas (forks, pull) have no use to show: 0.
    pub used: u64,
    /// `limit` and `used` count bytes.
    pub bytes: bool,
    /// What it counts, for people.
    pub what: String,
    pub per_request: bool,
}

/// A live VM process on airlockd's host (the caller's own).
#[derive(Clone, Debug, PartialEq)]
pub struct Vm {
    pub session_id: String,
    pub pid: i32,
    /// "kvm" or "tcg".
    pub accelerator: String,
    pub vcpus: u32,
    pub host_cpu_percent: f64,
    pub host_rss: u64,
}

/// A named disk of the caller's that outlives sessions (`airlock volume --help`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Volume {
    pub name: String,
    /// Its filesystem's size in bytes.
    pub size: u64,
    /// A read-only copy (NAME@TAG).
    pub snapshot: bool,
    /// "", "snapshot of NAME", "fork of NAME for session ID".
    pub origin: String,
    /// Grows with every import.
    pub generation: i64,
    pub created: SystemTime,
    /// Sessions (running or paused) that attach it now.
    pub holders: Vec<String>,
    /// One of them writes it.
    pub held_read_write: bool,
}

impl Volume {
    fn from_wire(v: pb::Volume) -> Volume {
        Volume {
            name: v.name,
            size: v.size_bytes,
            snapshot: v.read_only,
            origin: v.origin,
            generation: v.generation,
            created: time_ms(v.created_unix_ms),
            holders: v.holders,
            held_read_write: v.held_read_write,
        }
    }
}

impl Client {
    /// The images the caller sees (its own, then root's).
    pub async fn images(&self) -> Result<Vec<Image>> {
        let reply: pb::ListImagesResponse =
            self.channel.unary("/airlock.v1.Images/List", &pb::ListImagesRequest::default()).await?;
        Ok(reply.images.into_iter().map(Image::from_wire).collect())
    }

    /// Has airlockd fetch an image from its registry into the caller's images (root's are
    /// everyone's); `progress(done, total)` is called with the bytes downloaded as it goes.
    pub async fn pull_image(&self, reference: &str, mut progress: impl FnMut(u64, u64)) -> Result<Image> {
        if reference.is_empty() {
            return Err(Error::invalid("name an image to pull, like python:3.11-slim"));
        }
        let request = pb::PullImageRequest { reference: reference.to_string(), if_missing: false };
        let mut responses = self
            .channel
            .server_streaming::<_, pb::ImageProgress>("/airlock.v1.Images/Pull", &request)
            .await?;
        while let Some(p) = responses.message().await? {
            if let Some(image) = p.image {
                return Ok(Image::from_wire(image));
            }
            progress(p.done_bytes, p.total_bytes);
        }
        Err(Error::Other {
            code: Code::Internal,
            message: "airlockd ended the pull without the image".to_string(),
        })
    }

    /// Imports an image archive (an OCI image layout or `docker save` tar, any compression) or,
    /// with `rootfs`, a root filesystem tar, as `reader` gives it; `name` tags it (an archive's
    /// own name otherwise; a root filesystem tar needs one). Nothing is unpacked on the host. If
    /// `reader` fails part-way nothing is imported and its error comes back ([`Error::Io`]).
    pub async fn import_image<R>(&self, reader: R, name: &str, rootfs: bool) -> Result<Image>
    where
        R: AsyncRead + Unpin,
    {
        if rootfs && name.is_empty() {
            return Err(Error::invalid(
                "name the image (like team/tool:1); a root filesystem tar has no name of its own",
            ));
        }
        let (mut requests, mut responses) =
            self.channel.streaming::<pb::ImportImageChunk, pb::Image>("/airlock.v1.Images/Import").await?;
        upload(&mut requests, &mut responses, reader, |data, first, last| pb::ImportImageChunk {
            name: if first { name.to_string() } else { String::new() },
            rootfs: first && rootfs,
            data,
            last,
        })
        .await?;
        Ok(Image::from_wire(one(&mut responses).await?))
    }

    /// Has airlockd build an image from Debian packages (mmdebstrap: minbase of `suite` plus
    /// `packages`) and, with `npm`, Node.js and those npm packages, whose install scripts run
    /// in a build VM without network; it is tagged `tag` in the caller's images.
    /// `progress(line)` gets each step and the build VM's output. Bad input is refused
    /// ([`Error::InvalidArgument`]) before anything runs; a build takes minutes (mmdebstrap's
    /// result is cached on the host), and dropping the future stops it.
    pub async fn build_image(&self, build: &ImageBuild, progress: impl FnMut(&str)) -> Result<Image> {
        if build.tag.is_empty() {
            return Err(Error::invalid("give the image a name (tag), like team/devbox:1"));
        }
        let request = pb::BuildImageRequest {
            suite: build.suite.clone(),
            packages: build.packages.clone(),
            npm: build.npm.clone(),
            env: build.env.iter().map(|(k, v)| format!("{}={}", k, v)).collect(),
            tag: build.tag.clone(),
        };
        let responses = self.channel.server_streaming("/airlock.v1.Images/Build", &request).await?;
        built(responses, progress).await
    }

    /// Builds an image from a Dockerfile, as `airlock image build -t TAG DIR` does: `context`
    /// is the build context as a tar (of the directory, `.dockerignore` applied: the caller
    /// makes it; `tokio::io::empty()` for none), sent as it is read. Each RUN runs in a build VM
    /// (no network unless `allow` or `presets` say); every step is cached. `progress(line)`
    /// gets the `Step N/M : ...` lines and RUN's output. A failing RUN is
    /// [`Error::FailedPrecondition`] with its exit status and last lines; a Dockerfile airlockd
    /// cannot build, [`Error::InvalidArgument`] naming the line.
    pub async fn build_dockerfile<R>(
        &self,
        build: &DockerfileBuild,
        context: R,
        progress: impl FnMut(&str),
    ) -> Result<Image>
    where
        R: AsyncRead + Unpin,
    {
        if build.tag.is_empty() {
            return Err(Error::invalid("give the image a name (tag), like team/app:1"));
        }
        let secrets = secret_bindings(&build.secrets)?;
        let (mut requests, mut responses) = self
            .channel
            .streaming::<pb::DockerfileBuildChunk, pb::BuildProgress>("/airlock.v1.Images/BuildDockerfile")
            .await?;
        let mut settings = Some(pb::DockerfileBuildChunk {
            dockerfile: build.dockerfile.clone(),
            tag: build.tag.clone(),
            build_args: build.build_args.clone().into_iter().collect(),
            target: build.target.clone(),
            allow: build.allow.clone(),
            allow_preset: build.presets.clone(),
            no_cache: build.no_cache,
            secrets,
            ..Default::default()
        });
        // airlockd reads the whole context before it builds; its lines come after.
        upload(&mut requests, &mut responses, context, |context, _, last| {
            let mut chunk = settings.take().unwrap_or_default();
            chunk.context = context;
            chunk.last = last;
            chunk
        })
        .await?;
        built(responses, progress).await
    }

    /// Removes image tags (every name must be the caller's, or nothing is removed); an image's
    /// disk space goes with its last tag unless a session (running or paused) still uses it.
    pub async fn remove_images<S: AsRef<str>>(&self, names: &[S]) -> Result<Vec<RemovedImage>> {
        let request =
            pb::RemoveImagesRequest { names: names.iter().map(|n| n.as_ref().to_string()).collect() };
        let reply: pb::RemoveImagesResponse =
            self.channel.unary("/airlock.v1.Images/Remove", &request).await?;
        Ok(reply
            .images
            .into_iter()
            .map(|r| RemovedImage {
                name: r.name,
                digest: r.digest,
                freed: r.freed,
                freed_bytes: r.freed_bytes,
                sessions: r.sessions,
            })
            .collect())
    }

    /// The caller's live VMs with their host CPU and memory (`airlock ps`).
    pub async fn vms(&self) -> Result<Vec<Vm>> {
        let reply: pb::ListVmsResponse =
            self.channel.unary("/airlock.v1.Vms/List", &pb::ListVmsRequest::default()).await?;
        Ok(reply
            .vms
            .into_iter()
            .map(|v| Vm {
                session_id: v.session_id,
                pid: v.pid,
                accelerator: v.accelerator,
                vcpus: v.vcpus,
                host_cpu_percent: v.host_cpu_percent,
                host_rss: v.host_rss_bytes,
            })
            .collect())
    }

    /// Makes an empty volume of `size` ("10g", or bytes), within the caller's disk quota.
    pub async fn create_volume(&self, name: &str, size: &str) -> Result<Volume> {
        if name.is_empty() {
            return Err(Error::invalid("name the volume, like \"data\""));
        }
        let request =
            pb::CreateVolumeRequest { name: name.to_string(), size_bytes: parse_size(size, "size")? };
        let v: pb::Volume = self.channel.unary("/airlock.v1.Volumes/Create", &request).await?;
        Ok(Volume::from_wire(v))
    }

    /// The caller's volumes, with who holds each.
    pub async fn volumes(&self) -> Result<Vec<Volume>> {
        let reply: pb::ListVolumesResponse =
            self.channel.unary("/airlock.v1.Volumes/List", &pb::ListVolumesRequest::default()).await?;
        Ok(reply.volumes.into_iter().map(Volume::from_wire).collect())
    }

    /// Removes a volume no session (running or paused) attaches.
    pub async fn remove_volume(&self, name: &str) -> Result<()> {
        let _: pb::RemoveVolumeResponse = self
            .channel
            .unary("/airlock.v1.Volumes/Remove", &pb::RemoveVolumeRequest { name: name.to_string() })
            .await?;
        Ok(())
    }

    /// Replaces a volume's content with a tar (any compression) as `reader` gives it, while no
    /// session attaches it; written with libext2fs, never unpacked on the host. If `reader`
    /// fails part-way nothing changes and its error comes back ([`Error::Io`]).
    pub async fn import_volume<R>(&self, name: &str, reader: R) -> Result<Volume>
    where
        R: AsyncRead + Unpin,
    {
        if name.is_empty() {
            return Err(Error::invalid("name the volume to import into"));
        }
        let (mut requests, mut responses) =
            self.channel.streaming::<pb::ImportVolumeChunk, pb::Volume>("/airlock.v1.Volumes/Import").await?;
        upload(&mut requests, &mut responses, reader, |data, first, last| pb::ImportVolumeChunk {
            name: if first { name.to_string() } else { String::new() },
            data,
            last,
        })
        .await?;
        Ok(Volume::from_wire(one(&mut responses).await?))
    }

    /// The caller's quotas and what it uses of each now (`airlock quota`). Creating, resuming
    /// and forking sessions fail with [`Error::LimitExceeded`] naming the quota they would
    /// exceed.
    pub async fn quota(&self) -> Result<Quota> {
        let report: pb::QuotaReport =
            self.channel.unary("/airlock.v1.Sessions/Quota", &pb::GetQuotaRequest {}).await?;
        Ok(Quota {
            tenant: report.tenant,
            items: report
                .items
                .into_iter()
                .map(|q| QuotaItem {
                    name: q.name,
                    limit: q.limit,
                    used: q.used,
                    bytes: q.bytes,
                    what: q.what,
                    per_request: q.per_request,
                })
                .collect(),
        })
    }

    /// A read-only copy of the volume as it is now, named `snapshot` (NAME@TAG).
    pub async fn snapshot_volume(&self, name: &str, snapshot: &str) -> Result<Volume> {
        let request = pb::SnapshotVolumeRequest { name: name.to_string(), snapshot: snapshot.to_string() };
        let v: pb::Volume = self.channel.unary("/airlock.v1.Volumes/Snapshot", &request).await?;
        Ok(Volume::from_wire(v))
    }
}
