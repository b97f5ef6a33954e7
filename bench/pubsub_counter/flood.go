package main

// The endpoint's own limit: a Go client publishing as fast as it can (`--flood HOST:PORT`), so a bench row can show
// how far above both bridges' rates the endpoint still answers. It shares the machine's cores with the endpoint,
// so what it measures is a floor of the endpoint's capacity, not its ceiling.

import (
	"context"
	"encoding/json"
	"os"
	"sync"
	"time"

	pb "cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

func flood(target, topic string, messages, size, batch, streams int) error {
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	client := pb.NewPublisherClient(conn)
	data := make([]byte, size)
	request := &pb.PublishRequest{Topic: topic, Messages: make([]*pb.PubsubMessage, batch)}
	for i := range request.Messages {
		request.Messages[i] = &pb.PubsubMessage{Data: data}
	}
	requests := make(chan struct{}, messages/batch)
	for i := 0; i < messages/batch; i++ {
		requests <- struct{}{}
	}
	close(requests)
	started := time.Now()
	errs := make(chan error, streams)
	var wg sync.WaitGroup
	for i := 0; i < streams; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range requests {
				if _, err := client.Publish(context.Background(), request); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	seconds := time.Since(started).Seconds()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	sent := messages / batch * batch
	return json.NewEncoder(os.Stdout).Encode(map[string]any{"messages": sent, "bytes": sent * size,
		"seconds": seconds})
}
