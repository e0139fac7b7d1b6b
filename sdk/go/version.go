package airlock

import (
	"context"
	"errors"
	"fmt"

	"airlock.dev/sdk/airlockv1"
	"google.golang.org/grpc/codes"
)

// APILevel is the level of airlockd's API this SDK was built for (see `service Api` in
// airlock.proto): Dial refuses a daemon older than it with ErrVersionMismatch.
const APILevel = 1

// SDKVersion is this SDK's release, which Dial tells airlockd (for its log).
const SDKVersion = "0.1.0"

// apiLevel is what Dial claims: APILevel, except in this package's own tests, which raise it
// above the daemon's to see the refusal.
var apiLevel uint32 = APILevel

// VersionInfo is what airlockd says of the API it speaks (Client.Version).
type VersionInfo struct {
	Level             uint32 // the daemon's API level
	OldestClientLevel uint32 // the oldest client level it still serves
	DaemonVersion     string // airlockd's release, like 0.1.0
}

// Version asks airlockd which API level it speaks and which release it is.
func (c *Client) Version(ctx context.Context) (VersionInfo, error) {
	reply, err := c.api.Version(ctx, &airlockv1.VersionRequest{ClientLevel: apiLevel,
		Client: "go-sdk " + SDKVersion})
	if err != nil {
		return VersionInfo{}, fromRPC(err)
	}
	return VersionInfo{reply.Level, reply.OldestClientLevel, reply.DaemonVersion}, nil
}

// checkVersion fails with ErrVersionMismatch when airlockd and this SDK cannot work together,
// so that a program stops at Dial with what to upgrade rather than at some later call with a
// puzzling error.
func (c *Client) checkVersion(ctx context.Context, address string) error {
	v, err := c.Version(ctx)
	var e *Error
	switch {
	case errors.As(err, &e) && e.Code == codes.Unimplemented:
		return mismatch(0, fmt.Sprintf("airlockd at %s predates API levels (it has no Api.Version); "+
			"this SDK needs level %d: upgrade airlockd", address, apiLevel))
	case errors.As(err, &e) && e.Code == codes.FailedPrecondition:
		// airlockd refuses a client below its oldest level itself, saying so.
		return mismatch(0, e.Message+" (this SDK speaks API level "+fmt.Sprint(apiLevel)+")")
	case err != nil:
		return err
	case v.Level < apiLevel:
		return mismatch(v.Level, fmt.Sprintf("airlockd %s speaks API level %d; this SDK needs %d: "+
			"upgrade airlockd", v.DaemonVersion, v.Level, apiLevel))
	case apiLevel < v.OldestClientLevel:
		return mismatch(v.Level, fmt.Sprintf("airlockd %s speaks API level %d and serves clients of "+
			"level %d and up; this SDK speaks %d: upgrade the SDK", v.DaemonVersion, v.Level,
			v.OldestClientLevel, apiLevel))
	}
	return nil
}

func mismatch(daemonLevel uint32, message string) error {
	return &Error{Kind: ErrVersionMismatch, Message: message, DaemonLevel: daemonLevel,
		ClientLevel: apiLevel}
}
