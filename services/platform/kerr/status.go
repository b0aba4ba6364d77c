package kerr

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/protoadapt"

	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
)

// ToStatus turns err into the gRPC status a tidemark service answers with: the
// table's gRPC code, and an ErrorDetail carrying the Kafka-style code, its
// name, retriability, the bad field and leader or controller hints.
// Context errors keep their gRPC meaning; other errors become
// UNKNOWN_SERVER_ERROR.
func ToStatus(err error) *status.Status {
	if err == nil {
		return status.New(codes.OK, "")
	}
	if s, ok := status.FromError(err); ok && !isKerr(err) {
		return s
	}
	e := As(err)
	switch {
	case !isKerr(err) && errors.Is(err, context.DeadlineExceeded):
		e = &Error{Code: RequestTimedOut, Message: err.Error()}
	case !isKerr(err) && errors.Is(err, context.Canceled):
		return status.New(codes.Canceled, err.Error())
	}
	info := Lookup(e.Code)
	st := status.New(info.GRPC, e.Error())
	details := []protoadapt.MessageV1{Detail(e)}
	if e.Partial != nil {
		details = append(details, protoadapt.MessageV1Of(e.Partial))
	}
	withDetail, derr := st.WithDetails(details...)
	if derr != nil {
		return st
	}
	return withDetail
}

func isKerr(err error) bool {
	var e *Error
	return errors.As(err, &e)
}

// Detail renders e as the protobuf ErrorDetail.
func Detail(e *Error) *commonv1.ErrorDetail {
	info := Lookup(e.Code)
	d := &commonv1.ErrorDetail{
		Code:      commonv1.ErrorCode(e.Code),
		Name:      info.Name,
		Retriable: info.Retriable,
		Message:   e.Message,
		Field:     e.Field,
	}
	if e.Leader != nil {
		d.Leader = &commonv1.LeaderHint{LeaderId: e.Leader.ID, Address: e.Leader.Address, LeaderEpoch: e.Leader.LeaderEpoch}
	}
	if e.Controller != nil {
		d.Controller = &commonv1.Node{Id: e.Controller.ID, Address: e.Controller.Address}
	}
	if e.Coordinator != nil {
		d.Coordinator = &commonv1.Node{Id: e.Coordinator.ID, Address: e.Coordinator.Address}
	}
	d.MemberId = e.MemberID
	return d
}

// FromDetail turns a protobuf ErrorDetail back into an *Error.
func FromDetail(d *commonv1.ErrorDetail) *Error {
	e := &Error{Code: Code(d.GetCode()), Message: d.GetMessage(), Field: d.GetField()}
	if l := d.GetLeader(); l != nil {
		e.Leader = &LeaderHint{ID: l.GetLeaderId(), Address: l.GetAddress(), LeaderEpoch: l.GetLeaderEpoch()}
	}
	if c := d.GetController(); c != nil {
		e.Controller = &NodeHint{ID: c.GetId(), Address: c.GetAddress()}
	}
	if c := d.GetCoordinator(); c != nil {
		e.Coordinator = &NodeHint{ID: c.GetId(), Address: c.GetAddress()}
	}
	e.MemberID = d.GetMemberId()
	return e
}

// FromStatus recovers the *Error a tidemark service sent. Statuses without an
// ErrorDetail (transport failures, say) map to the nearest Kafka code:
// unavailable and cancelled connections are NETWORK_EXCEPTION (retriable),
// deadlines are REQUEST_TIMED_OUT.
func FromStatus(err error) *Error {
	if err == nil {
		return nil
	}
	if e, ok := err.(*Error); ok {
		return e
	}
	st, ok := status.FromError(err)
	if !ok {
		return As(err)
	}
	var e *Error
	var partial proto.Message
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *commonv1.ErrorDetail:
			if e == nil {
				e = FromDetail(d)
			}
		case proto.Message:
			partial = d
		}
	}
	if e != nil {
		e.Partial = partial
		return e
	}
	switch st.Code() {
	case codes.Unavailable:
		return &Error{Code: NetworkException, Message: st.Message()}
	case codes.DeadlineExceeded:
		return &Error{Code: RequestTimedOut, Message: st.Message()}
	case codes.Unimplemented:
		return &Error{Code: UnsupportedVersion, Message: st.Message()}
	case codes.InvalidArgument:
		return &Error{Code: InvalidRequest, Message: st.Message()}
	case codes.NotFound:
		return &Error{Code: UnknownTopicOrPartition, Message: st.Message()}
	case codes.ResourceExhausted:
		return &Error{Code: MessageTooLarge, Message: st.Message()}
	case codes.PermissionDenied:
		return &Error{Code: ClusterAuthorizationFailed, Message: st.Message()}
	case codes.Unauthenticated:
		return &Error{Code: SaslAuthenticationFailed, Message: st.Message()}
	}
	return &Error{Code: UnknownServerError, Message: st.Message()}
}

// FromCall turns any error of an outgoing call into the *Error the server
// meant: the error itself or its ErrorDetail when there is one, else the
// nearest code for the failure. The caller's own context ending is
// REQUEST_TIMED_OUT; a call the transport cut off (cancelled with no
// detail; callers check their own context first) is NETWORK_EXCEPTION,
// worth another try like a broken connection.
func FromCall(err error) *Error {
	var ke *Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ke):
		return ke
	case errors.Is(err, context.DeadlineExceeded):
		return New(RequestTimedOut, "%v", err)
	case errors.Is(err, context.Canceled):
		return New(RequestTimedOut, "canceled: %v", err)
	}
	if st, ok := status.FromError(err); ok && st.Code() == codes.Canceled && len(st.Details()) == 0 {
		return New(NetworkException, "canceled: %s", st.Message())
	}
	return FromStatus(err)
}
