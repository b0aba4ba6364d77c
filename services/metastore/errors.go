package metastore

import (
	"errors"
	"fmt"

	"tidemark.io/services/platform/kerr"
)

// ErrControllerMoved matches (errors.Is) every *ControllerMovedError.
var ErrControllerMoved = errors.New("metastore: controller moved")

// ControllerMovedError says a fenced write was refused because its session
// no longer owns the controller: another controller was elected, or the
// session's lease expired or was revoked. Nothing was written. The caller
// must stop acting as controller.
type ControllerMovedError struct {
	// Epoch is the refused session's controller epoch.
	Epoch int32
	// CurrentEpoch is the controller epoch in etcd when the write was refused.
	CurrentEpoch int32
	// Current is the active controller then, if there was one.
	Current *ControllerInfo
}

func (e *ControllerMovedError) Error() string {
	if e.Current != nil {
		return fmt.Sprintf("metastore: controller epoch %d superseded by controller %d at epoch %d",
			e.Epoch, e.Current.ControllerID, e.CurrentEpoch)
	}
	return fmt.Sprintf("metastore: controller epoch %d no longer holds the controller key (current epoch %d)",
		e.Epoch, e.CurrentEpoch)
}

// Is matches ErrControllerMoved.
func (e *ControllerMovedError) Is(target error) bool { return target == ErrControllerMoved }

// Unwrap exposes the Kafka-style code: NOT_CONTROLLER, with the new
// controller as a hint when one is known.
func (e *ControllerMovedError) Unwrap() error {
	ke := kerr.New(kerr.NotController, "controller epoch %d superseded", e.Epoch)
	if e.Current != nil {
		ke.Controller = &kerr.NodeHint{ID: e.Current.ControllerID, Address: e.Current.Address}
	}
	return ke
}
