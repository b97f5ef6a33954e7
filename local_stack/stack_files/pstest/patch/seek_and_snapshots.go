// Seek and snapshots for pstest, compiled into Google's pstest package in place of its Seek (local_stack/fetch.py
// copies the module, takes its Seek out and adds this file). Its Seek handles a time only, and redelivers messages
// of every topic without their data; it has no snapshots. These behave as the service documents them:
//   - a seek to a time acks the subscription's messages published before it and makes those published at or after it
//     deliverable again, acked ones too when the subscription retains acked messages (retain_acked_messages) or its
//     topic retains messages (message_retention_duration);
//   - a snapshot keeps the subscription's unacked messages when it is taken; a seek to it makes them and every
//     message published after it deliverable, and acks the rest.

package pstest

import (
	"context"
	"sort"
	"strings"
	"time"

	pb "cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

type snapshot struct {
	proto   *pb.Snapshot
	taken   time.Time
	unacked map[string]bool // the subscription's unacked message ids when the snapshot was taken
}

// Snapshots per server, guarded by the server's mutex (GServer's fields are pstest's own).
var snapshotsOf = map[*GServer]map[string]*snapshot{}

func (s *GServer) snapshots() map[string]*snapshot {
	if snapshotsOf[s] == nil {
		snapshotsOf[s] = map[string]*snapshot{}
	}
	return snapshotsOf[s]
}

// Seek updates a subscription to a point in time or to a snapshot.
func (s *GServer) Seek(_ context.Context, req *pb.SeekRequest) (*pb.SeekResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()

	if handled, ret, err := s.runReactor(req, "Seek", &pb.SeekResponse{}); handled || err != nil {
		return ret.(*pb.SeekResponse), err
	}
	sub, err := s.findSubscription(req.Subscription)
	if err != nil {
		return nil, err
	}
	if sub.topic == nil {
		return nil, status.Errorf(codes.FailedPrecondition, "the topic of subscription %q was deleted", req.Subscription)
	}
	var deliverable func(m *Message) bool
	switch target := req.Target.(type) {
	case *pb.SeekRequest_Time:
		at := target.Time.AsTime()
		replayAcked := sub.proto.RetainAckedMessages || sub.topic.proto.GetMessageRetentionDuration() != nil
		deliverable = func(m *Message) bool {
			_, unacked := sub.msgs[m.ID]
			return !m.PublishTime.Before(at) && (unacked || replayAcked)
		}
	case *pb.SeekRequest_Snapshot:
		snap := s.snapshots()[target.Snapshot]
		if snap == nil {
			return nil, status.Errorf(codes.NotFound, "snapshot %q", target.Snapshot)
		}
		if snap.proto.Topic != sub.proto.Topic {
			return nil, status.Errorf(codes.FailedPrecondition, "snapshot %q is of topic %q, not of the subscription's %q",
				target.Snapshot, snap.proto.Topic, sub.proto.Topic)
		}
		deliverable = func(m *Message) bool { return snap.unacked[m.ID] || !m.PublishTime.Before(snap.taken) }
	default:
		return nil, status.Errorf(codes.InvalidArgument, "missing Seek target type")
	}
	msgs := map[string]*message{}
	for _, m := range s.msgs {
		if m.Topic != sub.proto.Topic {
			continue
		}
		if !deliverable(m) {
			if _, unacked := sub.msgs[m.ID]; unacked {
				m.acks++
			}
			continue
		}
		msgs[m.ID] = &message{
			publishTime: m.PublishTime,
			proto: &pb.ReceivedMessage{AckId: m.ID, Message: &pb.PubsubMessage{
				Data: m.Data, Attributes: m.Attributes, MessageId: m.ID,
				PublishTime: timestamppb.New(m.PublishTime), OrderingKey: m.OrderingKey,
			}},
			deliveries:  &m.deliveries,
			acks:        &m.acks,
			streamIndex: -1,
		}
	}
	if sub.filter != nil {
		filterMsgs(msgs, sub.filter)
	}
	sub.msgs = msgs
	return &pb.SeekResponse{}, nil
}

func (s *GServer) CreateSnapshot(_ context.Context, req *pb.CreateSnapshotRequest) (*pb.Snapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()

	if handled, ret, err := s.runReactor(req, "CreateSnapshot", &pb.Snapshot{}); handled || err != nil {
		return ret.(*pb.Snapshot), err
	}
	if !strings.HasPrefix(req.Name, "projects/") || !strings.Contains(req.Name, "/snapshots/") {
		return nil, status.Errorf(codes.InvalidArgument, "bad snapshot name %q", req.Name)
	}
	if s.snapshots()[req.Name] != nil {
		return nil, status.Errorf(codes.AlreadyExists, "snapshot %q", req.Name)
	}
	sub, err := s.findSubscription(req.Subscription)
	if err != nil {
		return nil, err
	}
	now := s.now()
	oldest := now
	unacked := map[string]bool{}
	for id, m := range sub.msgs {
		unacked[id] = true
		if m.publishTime.Before(oldest) {
			oldest = m.publishTime
		}
	}
	proto := &pb.Snapshot{Name: req.Name, Topic: sub.proto.Topic, Labels: req.Labels,
		ExpireTime: timestamppb.New(oldest.Add(7 * 24 * time.Hour))}
	s.snapshots()[req.Name] = &snapshot{proto: proto, taken: now, unacked: unacked}
	return proto, nil
}

func (s *GServer) GetSnapshot(_ context.Context, req *pb.GetSnapshotRequest) (*pb.Snapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()

	snap := s.snapshots()[req.Snapshot]
	if snap == nil {
		return nil, status.Errorf(codes.NotFound, "snapshot %q", req.Snapshot)
	}
	return snap.proto, nil
}

func (s *GServer) ListSnapshots(_ context.Context, req *pb.ListSnapshotsRequest) (*pb.ListSnapshotsResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()

	response := &pb.ListSnapshotsResponse{}
	for name, snap := range s.snapshots() {
		if strings.HasPrefix(name, req.Project+"/snapshots/") {
			response.Snapshots = append(response.Snapshots, snap.proto)
		}
	}
	sort.Slice(response.Snapshots, func(i, j int) bool { return response.Snapshots[i].Name < response.Snapshots[j].Name })
	return response, nil
}

func (s *GServer) DeleteSnapshot(_ context.Context, req *pb.DeleteSnapshotRequest) (*emptypb.Empty, error) {
	s.mu.Lock()
	defer s.mu.Unlock()

	if s.snapshots()[req.Snapshot] == nil {
		return nil, status.Errorf(codes.NotFound, "snapshot %q", req.Snapshot)
	}
	delete(s.snapshots(), req.Snapshot)
	return &emptypb.Empty{}, nil
}
