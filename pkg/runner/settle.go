package runner

import (
	"context"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// settlement is how a delivery of work is settled.
type settlement int

const (
	// settleAck: done with the work (the run ended and its record says
	// so, or it is not to run here).
	settleAck settlement = iota
	// settleRetry: deliver the work again after a delay.
	settleRetry
	// settleRelease: deliver it again now, to another runner of the pool.
	settleRelease
	// settleTerm: never deliver it again.
	settleTerm
)

// delivery is one delivery of a work message. From receipt until it is
// settled it keeps the message in progress every AckWait/3, so work is
// never redelivered while this runner still holds it — through a cancel's
// or a deadline's teardown too. The work of a run that runs is settled
// only once the run's end is recorded (pkg/runs: the work stream is the
// index of the runs not ended). It is settled at most once.
type delivery struct {
	msg   jetstream.Msg
	first bool // the work's first delivery

	once sync.Once
	stop context.CancelFunc
	done chan struct{}
}

// deliver starts the delivery's heartbeat.
func (h *Host) deliver(msg jetstream.Msg) *delivery {
	ctx, stop := context.WithCancel(context.Background())
	d := &delivery{msg: msg, stop: stop, done: make(chan struct{})}
	if md, err := msg.Metadata(); err == nil {
		d.first = md.NumDelivered == 1
	}
	every := h.cfg.AckWait / 3
	go func() {
		defer close(d.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				_ = msg.InProgress() // resets the ack wait on the server
			}
		}
	}()
	return d
}

// settle is the one place work is settled: it stops the heartbeat, then
// acks, naks or terminates the message. Only the first call of settle or
// release on a delivery has an effect.
func (d *delivery) settle(s settlement, delay time.Duration) {
	d.once.Do(func() {
		d.stop()
		<-d.done
		switch s {
		case settleAck:
			_ = d.msg.Ack()
		case settleRetry:
			_ = d.msg.NakWithDelay(delay)
		case settleRelease:
			_ = d.msg.Nak()
		case settleTerm:
			_ = d.msg.Term()
		}
	})
}

// release stops the heartbeat without settling: if nothing settled the
// work, the server delivers it again after the ack wait.
func (d *delivery) release() {
	d.once.Do(func() {
		d.stop()
		<-d.done
	})
}
