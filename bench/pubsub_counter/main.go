// A Pub/Sub endpoint for benchmarks, not an emulator: Publish answers at once with message ids and counts what
// arrives (messages, bytes, arrivals per second); a subscription serves messages generated on the spot, as many as
// it was given (POST /preload), over Pull and StreamingPull, and counts acks. Nothing published is kept, so neither
// a bridge nor the Java connector is slowed by it the way pstest slows both (its publish path tops out near
// 40,000/s and its Pull scans the whole backlog). Counts are read and reset over HTTP (GET /stats, POST /reset).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	pb "cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Published messages and bytes, and how many arrived in each second (unix seconds), for a steady-state rate.
type publishCounts struct {
	mu        sync.Mutex
	messages  int64
	bytes     int64
	perSecond map[int64]int64
	lastNanos int64 // when the last Publish was counted (Unix ns): where a killed run's publishing ended
}

func (c *publishCounts) add(messages, bytes int64) {
	now := time.Now()
	c.mu.Lock()
	c.messages += messages
	c.bytes += bytes
	c.perSecond[now.Unix()] += messages
	c.lastNanos = now.UnixNano()
	c.mu.Unlock()
}

type subscription struct {
	proto    *pb.Subscription
	left     atomic.Int64 // messages still to serve
	size     atomic.Int64 // bytes of data per message
	next     atomic.Int64 // the next message's number (its id and ack id)
	served   atomic.Int64
	acked    atomic.Int64
	modacked atomic.Int64
}

// take hands out up to n message numbers from the preloaded supply: the first one and how many.
func (s *subscription) take(n int64) (int64, int64) {
	for {
		left := s.left.Load()
		if left <= 0 {
			return 0, 0
		}
		if n > left {
			n = left
		}
		if s.left.CompareAndSwap(left, left-n) {
			first := s.next.Add(n) - n
			s.served.Add(n)
			return first, n
		}
	}
}

type server struct {
	pb.UnimplementedPublisherServer
	pb.UnimplementedSubscriberServer

	published  publishCounts
	nextID     atomic.Int64
	started    time.Time
	nextStream atomic.Int64
	streams    sync.Map // stream number -> *pullStream, for the acks that come as unary calls

	mu     sync.Mutex
	topics map[string]*pb.Topic
	subs   map[string]*subscription
	data   map[int64][]byte // a payload per size, shared by every message of that size
}

// --- publisher -----------------------------------------------------------------------------------------------------

func (s *server) Publish(_ context.Context, req *pb.PublishRequest) (*pb.PublishResponse, error) {
	ids := make([]string, len(req.Messages))
	first := s.nextID.Add(int64(len(ids))) - int64(len(ids))
	var bytes int64
	for i, m := range req.Messages {
		ids[i] = strconv.FormatInt(first+int64(i), 10)
		bytes += int64(len(m.Data))
	}
	s.published.add(int64(len(ids)), bytes)
	return &pb.PublishResponse{MessageIds: ids}, nil
}

func (s *server) CreateTopic(_ context.Context, topic *pb.Topic) (*pb.Topic, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.topics[topic.Name] = topic
	return topic, nil
}

// GetTopic answers for any topic: a bench publishes to topics it never made here.
func (s *server) GetTopic(_ context.Context, req *pb.GetTopicRequest) (*pb.Topic, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if topic, ok := s.topics[req.Topic]; ok {
		return topic, nil
	}
	return &pb.Topic{Name: req.Topic}, nil
}

func (s *server) DeleteTopic(_ context.Context, req *pb.DeleteTopicRequest) (*emptypb.Empty, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.topics, req.Topic)
	return &emptypb.Empty{}, nil
}

// --- subscriber ----------------------------------------------------------------------------------------------------

// A StreamingPull stream's messages sent and not yet acked (or nacked), wherever the ack comes from: Google's
// clients ack over unary Acknowledge calls, not over the stream.
type pullStream struct {
	outstanding atomic.Int64
	wake        chan struct{}
}

// release frees the stream slots of these ack ids ("<stream>-<message number>"; stream 0: a unary Pull's).
func (s *server) release(ackIDs []string) {
	for _, ackID := range ackIDs {
		for i := 0; i < len(ackID); i++ {
			if ackID[i] != '-' {
				continue
			}
			number, err := strconv.ParseInt(ackID[:i], 10, 64)
			if found, ok := s.streams.Load(number); err == nil && ok {
				stream := found.(*pullStream)
				stream.outstanding.Add(-1)
				select {
				case stream.wake <- struct{}{}:
				default:
				}
			}
			break
		}
	}
}

func (s *server) subscription(name string) (*subscription, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sub, ok := s.subs[name]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "subscription %q (preload it first: POST /preload)", name)
	}
	return sub, nil
}

func (s *server) CreateSubscription(_ context.Context, proto *pb.Subscription) (*pb.Subscription, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if proto.AckDeadlineSeconds == 0 {
		proto.AckDeadlineSeconds = 10
	}
	if _, ok := s.subs[proto.Name]; !ok {
		s.subs[proto.Name] = &subscription{proto: proto}
	}
	return proto, nil
}

func (s *server) GetSubscription(_ context.Context, req *pb.GetSubscriptionRequest) (*pb.Subscription, error) {
	sub, err := s.subscription(req.Subscription)
	if err != nil {
		return nil, err
	}
	return sub.proto, nil
}

func (s *server) DeleteSubscription(_ context.Context, req *pb.DeleteSubscriptionRequest) (*emptypb.Empty, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.subs, req.Subscription)
	return &emptypb.Empty{}, nil
}

func (s *server) payload(size int64) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	data, ok := s.data[size]
	if !ok {
		data = make([]byte, size)
		for i := range data {
			data[i] = byte('a' + i%26)
		}
		s.data[size] = data
	}
	return data
}

// messages makes up to n of the subscription's next messages (the same data, each with an id of its own), their ack
// ids naming the stream that sends them (0: a unary Pull).
func (s *server) messages(sub *subscription, n int64, stream int64) []*pb.ReceivedMessage {
	first, count := sub.take(n)
	if count == 0 {
		return nil
	}
	data, now, prefix := s.payload(sub.size.Load()), timestamppb.Now(), strconv.FormatInt(stream, 10)+"-"
	out := make([]*pb.ReceivedMessage, count)
	for i := range out {
		id := strconv.FormatInt(first+int64(i), 10)
		out[i] = &pb.ReceivedMessage{AckId: prefix + id,
			Message: &pb.PubsubMessage{Data: data, MessageId: id, PublishTime: now}}
	}
	return out
}

func (s *server) Pull(_ context.Context, req *pb.PullRequest) (*pb.PullResponse, error) {
	sub, err := s.subscription(req.Subscription)
	if err != nil {
		return nil, err
	}
	max := int64(req.MaxMessages)
	if max <= 0 {
		max = 1000
	}
	return &pb.PullResponse{ReceivedMessages: s.messages(sub, max, 0)}, nil
}

func (s *server) Acknowledge(_ context.Context, req *pb.AcknowledgeRequest) (*emptypb.Empty, error) {
	sub, err := s.subscription(req.Subscription)
	if err != nil {
		return nil, err
	}
	sub.acked.Add(int64(len(req.AckIds)))
	s.release(req.AckIds)
	return &emptypb.Empty{}, nil
}

func (s *server) ModifyAckDeadline(_ context.Context, req *pb.ModifyAckDeadlineRequest) (*emptypb.Empty, error) {
	sub, err := s.subscription(req.Subscription)
	if err != nil {
		return nil, err
	}
	sub.modacked.Add(int64(len(req.AckIds)))
	if req.AckDeadlineSeconds == 0 { // a nack frees its slot (a bench's bridges never nack: it is not given again)
		s.release(req.AckIds)
	}
	return &emptypb.Empty{}, nil
}

// StreamingPull sends the supply in batches of up to 1,000 while the stream's outstanding messages (sent, not yet
// acked or nacked) stay under the client's max_outstanding_messages.
func (s *server) StreamingPull(stream pb.Subscriber_StreamingPullServer) error {
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	sub, err := s.subscription(first.Subscription)
	if err != nil {
		return err
	}
	limit := first.MaxOutstandingMessages
	if limit <= 0 {
		limit = 1000
	}
	number, state := s.nextStream.Add(1), &pullStream{wake: make(chan struct{}, 1)}
	s.streams.Store(number, state)
	defer s.streams.Delete(number)
	received := make(chan error, 1)
	go func() {
		for {
			req, err := stream.Recv()
			if err != nil {
				received <- err
				return
			}
			sub.acked.Add(int64(len(req.AckIds)))
			s.release(req.AckIds)
			sub.modacked.Add(int64(len(req.ModifyDeadlineAckIds)))
			for i, seconds := range req.ModifyDeadlineSeconds {
				if seconds == 0 && i < len(req.ModifyDeadlineAckIds) {
					s.release(req.ModifyDeadlineAckIds[i : i+1])
				}
			}
		}
	}()
	for {
		room := limit - state.outstanding.Load()
		if room > 1000 {
			room = 1000
		}
		if room > 0 {
			if batch := s.messages(sub, room, number); len(batch) > 0 {
				state.outstanding.Add(int64(len(batch)))
				if err := stream.Send(&pb.StreamingPullResponse{ReceivedMessages: batch}); err != nil {
					return err
				}
				continue
			}
		}
		select { // nothing to send now: wait for acks, a new supply (polled), or the stream's end
		case <-state.wake:
		case err := <-received:
			if err == io.EOF {
				return nil
			}
			return err
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// --- counts over HTTP ----------------------------------------------------------------------------------------------

func (s *server) stats(w http.ResponseWriter, _ *http.Request) {
	s.published.mu.Lock()
	perSecond := map[string]int64{}
	for second, n := range s.published.perSecond {
		perSecond[strconv.FormatInt(second, 10)] = n
	}
	published := map[string]any{"messages": s.published.messages, "bytes": s.published.bytes,
		"per_second": perSecond, "last_unix_ns": s.published.lastNanos}
	s.published.mu.Unlock()
	subs := map[string]any{}
	s.mu.Lock()
	for name, sub := range s.subs {
		subs[name] = map[string]int64{"left": sub.left.Load(), "served": sub.served.Load(), "acked": sub.acked.Load(),
			"modacked": sub.modacked.Load()}
	}
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"published": published, "subscriptions": subs,
		"uptime_s": time.Since(s.started).Seconds()})
}

func (s *server) reset(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST /reset", http.StatusMethodNotAllowed)
		return
	}
	s.published.mu.Lock()
	s.published.messages, s.published.bytes, s.published.perSecond = 0, 0, map[int64]int64{}
	s.published.lastNanos = 0
	s.published.mu.Unlock()
	s.mu.Lock()
	s.subs = map[string]*subscription{}
	s.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// preload gives a subscription (made if missing) `messages` more messages of `size` bytes to serve.
func (s *server) preload(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST /preload?subscription=projects/p/subscriptions/s&messages=N&size=B", http.StatusMethodNotAllowed)
		return
	}
	query := r.URL.Query()
	name := query.Get("subscription")
	messages, err1 := strconv.ParseInt(query.Get("messages"), 10, 64)
	size, err2 := strconv.ParseInt(query.Get("size"), 10, 64)
	if name == "" || err1 != nil || err2 != nil || messages < 0 || size < 0 {
		http.Error(w, "give subscription=projects/p/subscriptions/s, messages=N and size=B", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	sub, ok := s.subs[name]
	if !ok {
		sub = &subscription{proto: &pb.Subscription{Name: name, Topic: query.Get("topic"), AckDeadlineSeconds: 10}}
		s.subs[name] = sub
	}
	s.mu.Unlock()
	sub.size.Store(size)
	sub.left.Add(messages)
	w.WriteHeader(http.StatusNoContent)
}

func main() {
	port := flag.Int("port", 8086, "the gRPC port (loopback, plaintext: the emulator switch of the clients)")
	statsPort := flag.Int("stats-port", 8087, "the HTTP port of /stats, /reset and /preload (loopback)")
	floodTarget := flag.String("flood", "", "instead of serving: publish to this host:port as fast as it answers, "+
		"and print what was sent and in how many seconds (JSON)")
	floodMessages := flag.Int("messages", 1000000, "--flood: how many messages")
	floodSize := flag.Int("size", 1024, "--flood: bytes of data per message")
	floodStreams := flag.Int("streams", 8, "--flood: publish calls in flight at once")
	flag.Parse()
	if *floodTarget != "" {
		if err := flood(*floodTarget, "projects/bench/topics/flood", *floodMessages, *floodSize, 1000,
			*floodStreams); err != nil {
			log.Fatal(err)
		}
		return
	}
	s := &server{published: publishCounts{perSecond: map[int64]int64{}}, started: time.Now(),
		topics: map[string]*pb.Topic{}, subs: map[string]*subscription{}, data: map[int64][]byte{}}
	listener, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", *port))
	if err != nil {
		log.Fatal(err)
	}
	grpcServer := grpc.NewServer(grpc.MaxRecvMsgSize(64 << 20))
	pb.RegisterPublisherServer(grpcServer, s)
	pb.RegisterSubscriberServer(grpcServer, s)
	mux := http.NewServeMux()
	mux.HandleFunc("/stats", s.stats)
	mux.HandleFunc("/reset", s.reset)
	mux.HandleFunc("/preload", s.preload)
	// Both listeners are bound before "listening" is printed: with ListenAndServe in a goroutine the line could
	// come first, and a caller's first /preload was refused (a CI run failed on it).
	statsListener, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", *statsPort))
	if err != nil {
		log.Fatal(err)
	}
	go func() { log.Fatal(http.Serve(statsListener, mux)) }()
	go func() {
		if err := grpcServer.Serve(listener); err != nil {
			log.Fatal(err)
		}
	}()
	fmt.Printf("pubsub counter listening on 127.0.0.1:%d (stats on %d)\n", *port, *statsPort)
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	<-stop
	grpcServer.Stop()
}
