// Command groupconsumer is a franz-go member of a consumer group, the Go twin of
// tests/java/castle/GroupConsumer.java: same name=value words, same stdout lines.
//
// Options: bootstrap, group, topics (comma separated) or pattern (a regular expression;
// under the consumer protocol the group coordinator matches it), records (stop after that
// many in all), idle-ms (stop when none came for that long), commit=sync|none, log=info|debug
// (franz-go's log on stderr). Kafka's config names that franz-go has an option for:
// group.protocol=consumer|classic (default classic, as Kafka's clients), group.remote.assignor
// =uniform|range (the client balancer franz-go maps to that server assignor), group.instance.id,
// client.id, session.timeout.ms (classic only). Any other dotted name is refused, so a test never
// believes it set something that was dropped.
//
// Lines: PROTOCOL consumer|classic once franz-go chose (it falls back to classic, silently but
// for this line, when the broker does not serve ConsumerGroupHeartbeat v1), SUBSCRIBED,
// ASSIGNED/REVOKED/LOST topic:partition..., RECORD topic partition offset key value,
// COMMITTED topic:partition=offset..., DONE records. SIGTERM closes the client (leaving the group).
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

var outMu sync.Mutex

// line prints one event; stdout is unbuffered in Go, so a kill right after loses nothing printed.
func line(format string, args ...any) {
	outMu.Lock()
	defer outMu.Unlock()
	fmt.Fprintf(os.Stdout, format+"\n", args...)
}

func words(partitions map[string][]int32) string {
	var out []string
	for topic, ps := range partitions {
		for _, p := range ps {
			out = append(out, fmt.Sprintf("%s:%d", topic, p))
		}
	}
	sort.Strings(out)
	if len(out) == 0 {
		return ""
	}
	return " " + strings.Join(out, " ")
}

// protocolLogger passes franz-go's log to stderr at the chosen level and turns the line that
// says which group protocol it manages into a PROTOCOL line on stdout.
type protocolLogger struct {
	level kgo.LogLevel
	once  sync.Once
}

func (l *protocolLogger) Level() kgo.LogLevel {
	if l.level < kgo.LogLevelInfo {
		return kgo.LogLevelInfo // the protocol choice is logged at info
	}
	return l.level
}

func (l *protocolLogger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	switch msg {
	case "beginning to manage the next-gen group lifecycle":
		l.once.Do(func() { line("PROTOCOL consumer") })
	case "beginning to manage the group lifecycle":
		l.once.Do(func() { line("PROTOCOL classic") })
	}
	if level <= l.level {
		fmt.Fprintf(os.Stderr, "%s [%s] %s %v\n", time.Now().Format(time.RFC3339Nano), level, msg, keyvals)
	}
}

type options struct {
	own   map[string]string
	kafka map[string]string
}

func parse(argv []string) (options, error) {
	o := options{own: map[string]string{}, kafka: map[string]string{}}
	for _, word := range argv {
		name, value, ok := strings.Cut(word, "=")
		if !ok || name == "" {
			return o, fmt.Errorf("not name=value: %s", word)
		}
		if strings.Contains(name, ".") {
			o.kafka[name] = value
		} else {
			o.own[name] = value
		}
	}
	return o, nil
}

func (o options) get(name, fallback string) string {
	if v, ok := o.own[name]; ok {
		return v
	}
	return fallback
}

func clientOptions(o options, logger *protocolLogger) ([]kgo.Opt, error) {
	opts := []kgo.Opt{
		kgo.SeedBrokers(strings.Split(o.get("bootstrap", ""), ",")...),
		kgo.ConsumerGroup(o.get("group", "")),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(), // no revocation between a poll and its commit
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(500 * time.Millisecond),
		kgo.WithLogger(logger),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, p map[string][]int32) { line("ASSIGNED%s", words(p)) }),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, p map[string][]int32) { line("REVOKED%s", words(p)) }),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, p map[string][]int32) { line("LOST%s", words(p)) }),
	}
	if pattern := o.get("pattern", ""); pattern != "" {
		opts = append(opts, kgo.ConsumeRegex(), kgo.ConsumeTopics(pattern))
	} else {
		opts = append(opts, kgo.ConsumeTopics(strings.Split(o.get("topics", ""), ",")...))
	}
	consumerProtocol := false
	balancer := kgo.CooperativeStickyBalancer()
	for name, value := range o.kafka {
		switch name {
		case "group.protocol":
			switch value {
			case "consumer":
				consumerProtocol = true
			case "classic":
			default:
				return nil, fmt.Errorf("group.protocol: consumer or classic, not %q", value)
			}
		case "group.remote.assignor":
			switch value {
			case "uniform":
			case "range":
				balancer = kgo.RangeBalancer()
			default:
				return nil, fmt.Errorf("group.remote.assignor: uniform or range, not %q", value)
			}
		case "group.instance.id":
			opts = append(opts, kgo.InstanceID(value))
		case "client.id":
			opts = append(opts, kgo.ClientID(value))
		case "session.timeout.ms":
			ms, err := strconv.Atoi(value)
			if err != nil {
				return nil, fmt.Errorf("session.timeout.ms: %w", err)
			}
			opts = append(opts, kgo.SessionTimeout(time.Duration(ms)*time.Millisecond))
		default:
			return nil, fmt.Errorf("no franz-go option for %s", name)
		}
	}
	opts = append(opts, kgo.Balancers(balancer))
	if consumerProtocol {
		// franz-go's opt-in to KIP-848; it maps the sticky balancer to "uniform", range to "range".
		opts = append(opts, kgo.ServerSideBalancer())
	}
	return opts, nil
}

func run() (int, error) {
	o, err := parse(os.Args[1:])
	if err != nil {
		return 0, err
	}
	limit, err := strconv.Atoi(o.get("records", strconv.Itoa(int(^uint(0)>>1))))
	if err != nil {
		return 0, fmt.Errorf("records: %w", err)
	}
	idleMs, err := strconv.ParseInt(o.get("idle-ms", "0"), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("idle-ms: %w", err)
	}
	commit := o.get("commit", "sync")
	if commit != "sync" && commit != "none" {
		return 0, fmt.Errorf("commit: sync or none, not %q", commit)
	}
	logger := &protocolLogger{level: kgo.LogLevelWarn}
	switch o.get("log", "warn") {
	case "info":
		logger.level = kgo.LogLevelInfo
	case "debug":
		logger.level = kgo.LogLevelDebug
	}
	opts, err := clientOptions(o, logger)
	if err != nil {
		return 0, err
	}
	client, err := kgo.NewClient(opts...)
	if err != nil {
		return 0, err
	}
	defer client.Close() // leaves the group

	stop, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer cancel()
	line("SUBSCRIBED")
	count := 0
	lastRecord := time.Now()
	for count < limit && (idleMs <= 0 || time.Since(lastRecord) < time.Duration(idleMs)*time.Millisecond) {
		pollCtx, pollDone := context.WithTimeout(stop, 200*time.Millisecond)
		fetches := client.PollFetches(pollCtx)
		pollDone()
		if stop.Err() != nil || fetches.IsClientClosed() {
			client.AllowRebalance()
			break
		}
		fetches.EachError(func(topic string, partition int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				fmt.Fprintf(os.Stderr, "fetch error %s:%d: %v\n", topic, partition, err)
			}
		})
		records := fetches.Records()
		if len(records) > 0 {
			lastRecord = time.Now()
			next := map[string]int64{}
			for _, r := range records {
				line("RECORD %s %d %d %s %s", r.Topic, r.Partition, r.Offset, text(r.Key), string(r.Value))
				next[fmt.Sprintf("%s:%d", r.Topic, r.Partition)] = r.Offset + 1
				count++
			}
			if commit == "sync" {
				// Not the stop context: a SIGTERM must not cancel the commit of records already printed,
				// or the member taking the partitions over would read them again.
				commitCtx, commitDone := context.WithTimeout(context.Background(), 30*time.Second)
				err := client.CommitRecords(commitCtx, records...)
				commitDone()
				if err != nil {
					fmt.Fprintf(os.Stderr, "commit failed: %v\n", err)
				} else {
					line("COMMITTED%s", offsets(next))
				}
			}
		}
		client.AllowRebalance()
	}
	return count, nil
}

func text(key []byte) string {
	if key == nil {
		return "null" // as Java prints a null key
	}
	return string(key)
}

func offsets(next map[string]int64) string {
	var out []string
	for partition, offset := range next {
		out = append(out, fmt.Sprintf("%s=%d", partition, offset))
	}
	sort.Strings(out)
	return " " + strings.Join(out, " ")
}

func main() {
	count, err := run()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	line("DONE %d", count)
}
