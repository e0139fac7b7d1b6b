package airlock

import (
	"context"
	"errors"
	"io"
	"strings"
	"time"

	"airlock.dev/sdk/airlockv1"
)

// Volume is a named disk of the caller's that outlives sessions (`airlock volume --help`).
type Volume struct {
	Name          string
	Size          uint64 // its filesystem's size in bytes
	Snapshot      bool   // a read-only copy (NAME@TAG)
	Origin        string // "", "snapshot of NAME", "fork of NAME for session ID"
	Generation    int64  // grows with every import
	Created       time.Time
	Holders       []string // sessions (running or paused) that attach it now
	HeldReadWrite bool     // one of them writes it
}

func volumeOf(v *airlockv1.Volume) Volume {
	return Volume{v.Name, v.SizeBytes, v.ReadOnly, v.Origin, v.Generation,
		time.UnixMilli(v.CreatedUnixMs), v.Holders, v.HeldReadWrite}
}

// volumeMounts reads "NAME:/PATH" and "NAME:/PATH:ro", as airlock's --volume.
func volumeMounts(specs []string) ([]*airlockv1.VolumeMount, error) {
	var out []*airlockv1.VolumeMount
	for _, spec := range specs {
		name, path, _ := strings.Cut(spec, ":")
		readOnly := strings.HasSuffix(path, ":ro")
		if readOnly || strings.HasSuffix(path, ":rw") {
			path = path[:len(path)-3]
		}
		if name == "" || !strings.HasPrefix(path, "/") {
			return nil, invalid("%q is not a volume to attach: write NAME:/PATH or NAME:/PATH:ro "+
				"(like \"data:/data:ro\")", spec)
		}
		out = append(out, &airlockv1.VolumeMount{Name: name, Path: path, ReadOnly: readOnly})
	}
	return out, nil
}

// Volumes creates, lists, fills and removes the caller's volumes. A session attaches them with
// SessionOptions.Volumes: read-write by one session at a time, read-only by any number.
type Volumes struct{ c *Client }

// Create makes an empty volume of size ("10g", or bytes), within the caller's disk quota.
func (vs *Volumes) Create(ctx context.Context, name, size string) (Volume, error) {
	if name == "" {
		return Volume{}, invalid("name the volume, like \"data\"")
	}
	bytes, err := ParseSize(size, "size")
	if err != nil {
		return Volume{}, err
	}
	v, err := vs.c.volumes.Create(ctx, &airlockv1.CreateVolumeRequest{Name: name, SizeBytes: bytes})
	if err != nil {
		return Volume{}, fromRPC(err)
	}
	return volumeOf(v), nil
}

// List returns the caller's volumes, with who holds each.
func (vs *Volumes) List(ctx context.Context) ([]Volume, error) {
	reply, err := vs.c.volumes.List(ctx, &airlockv1.ListVolumesRequest{})
	if err != nil {
		return nil, fromRPC(err)
	}
	out := make([]Volume, 0, len(reply.Volumes))
	for _, v := range reply.Volumes {
		out = append(out, volumeOf(v))
	}
	return out, nil
}

// Remove removes a volume no session (running or paused) attaches.
func (vs *Volumes) Remove(ctx context.Context, name string) error {
	_, err := vs.c.volumes.Remove(ctx, &airlockv1.RemoveVolumeRequest{Name: name})
	return fromRPC(err)
}

// Snapshot makes a read-only copy of the volume as it is now, named snapshot (NAME@TAG).
func (vs *Volumes) Snapshot(ctx context.Context, name, snapshot string) (Volume, error) {
	v, err := vs.c.volumes.Snapshot(ctx, &airlockv1.SnapshotVolumeRequest{Name: name, Snapshot: snapshot})
	if err != nil {
		return Volume{}, fromRPC(err)
	}
	return volumeOf(v), nil
}

// Import replaces the volume's content with a tar (any compression) as r gives it, while no
// session attaches it. If r fails part-way nothing changes and r's error is returned.
func (vs *Volumes) Import(ctx context.Context, name string, r io.Reader) (Volume, error) {
	if name == "" {
		return Volume{}, invalid("name the volume to import into")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // a stream that ends without its last piece changes nothing
	stream, err := vs.c.volumes.Import(ctx)
	if err != nil {
		return Volume{}, fromRPC(err)
	}
	first := true
	err = sendPieces(r, func(data []byte, last bool) error {
		chunk := &airlockv1.ImportVolumeChunk{Data: data, Last: last}
		if first {
			chunk.Name, first = name, false
		}
		return stream.Send(chunk)
	})
	var readErr *readError
	if errors.As(err, &readErr) {
		return Volume{}, readErr.err
	}
	reply, err := stream.CloseAndRecv()
	if err != nil {
		return Volume{}, fromRPC(err)
	}
	return volumeOf(reply), nil
}
