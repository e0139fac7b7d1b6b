//! What sessions are made from and attach: images, volumes; and the live VMs.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::client::Client;
use crate::error::{Code, Error, Result};
use crate::pb;
use crate::session::{parse_size, time_ms};

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

    /// A read-only copy of the volume as it is now, named `snapshot` (NAME@TAG).
    pub async fn snapshot_volume(&self, name: &str, snapshot: &str) -> Result<Volume> {
        let request = pb::SnapshotVolumeRequest { name: name.to_string(), snapshot: snapshot.to_string() };
        let v: pb::Volume = self.channel.unary("/airlock.v1.Volumes/Snapshot", &request).await?;
        Ok(Volume::from_wire(v))
    }
}
