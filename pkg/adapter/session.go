package adapter

import (
	"context"
	"sync"
	"time"

	"github.com/agentmesh/agentmesh/pkg/wire"
)

// Interactive is implemented by an adapter whose runs can be sessions
// (docs/contract.md §6.1): a live agent process that takes follow-up
// prompts and asks for permissions. The runner gives such a run a Session
// (Call.Session) when its submitter reads contract v3; without one the
// adapter runs a single turn and decides permissions by its policy alone.
type Interactive interface {
	Interactive() bool
}

// IsInteractive reports whether a is an Interactive adapter that says so.
func IsInteractive(a Adapter) bool {
	i, ok := a.(Interactive)
	return ok && i.Interactive()
}

// MaxQueuedInputs bounds the follow-up prompts a session holds ahead of
// its agent; one more is refused, never dropped.
const MaxQueuedInputs = 16

// Session is the live side of one interactive run: the follow-up prompts
// clients send it, interrupts of its turn in progress, and the answers to
// its permission requests. The runner's control endpoints feed it (Send,
// Interrupt, Answer); the adapter consumes it (Next, Interrupts, Ask). It
// is safe for concurrent use.
type Session struct {
	mu        sync.Mutex
	queue     []string
	turn      int // the number of the last turn queued or started
	closed    bool
	closedWhy *wire.Error
	wake      chan struct{} // a prompt was queued
	interrupt chan struct{} // an interrupt of the turn in progress
	waiting   bool          // Next is waiting between turns
	asks      map[string]*ask
	done      map[string]*wire.Error // requests already resolved without an answer
}

// A PermissionOption is one of the choices a permission request offers,
// as ACP names them: kind is allow_once, allow_always, reject_once or
// reject_always.
type PermissionOption struct {
	ID, Name, Kind string
}

// Allows reports whether the option allows the tool call.
func (o PermissionOption) Allows() bool { return o.Kind == "allow_once" || o.Kind == "allow_always" }

type ask struct {
	options []PermissionOption
	answer  chan string // the chosen option's id, one value
}

// NewSession returns the session of a run whose first turn is under way.
func NewSession() *Session {
	return &Session{turn: 1, wake: make(chan struct{}, 1), interrupt: make(chan struct{}, 1), asks: map[string]*ask{}, done: map[string]*wire.Error{}}
}

func ended(why string) *wire.Error {
	return wire.Errorf(wire.SessionEnded, "the session %s", why)
}

// Send queues prompt as the session's next turn and returns its number
// and how many prompts are ahead of it. A session that has ended refuses
// it with SessionEnded; a full queue with AdmissionRejected.
func (s *Session) Send(prompt string) (turn, ahead int, err error) {
	if prompt == "" {
		return 0, 0, wire.Errorf(wire.AgenticRequestValidationError, "input: field \"prompt\" is empty")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, 0, s.closedWhy
	}
	if len(s.queue) >= MaxQueuedInputs {
		return 0, 0, wire.Errorf(wire.AdmissionRejected, "the session already holds %d prompts ahead of its agent", len(s.queue)).Retry()
	}
	s.queue = append(s.queue, prompt)
	s.turn++
	select {
	case s.wake <- struct{}{}:
	default:
	}
	return s.turn, len(s.queue) - 1, nil
}

// Interrupt cancels the turn in progress; the session goes on. It is a
// no-op between turns.
func (s *Session) Interrupt() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return s.closedWhy
	}
	if !s.waiting {
		select {
		case s.interrupt <- struct{}{}:
		default:
		}
	}
	return nil
}

// Interrupts delivers one value for each Interrupt of a turn in
// progress. An adapter drains it when a turn starts (Next does).
func (s *Session) Interrupts() <-chan struct{} { return s.interrupt }

// Next waits for the next turn's prompt. When idle passes with none
// queued, it closes the session with SessionEnded saying it "was idle for
// <idle> and " then idleEnd ("ended", say); when ctx ends, with the
// cause. A Send after that is refused, never lost; Next reports ok false.
func (s *Session) Next(ctx context.Context, idle time.Duration, idleEnd string) (prompt string, turn int, ok bool) {
	t := time.NewTimer(idle)
	defer t.Stop()
	s.mu.Lock()
	s.waiting = true
	idled := false
	for {
		if len(s.queue) == 0 && idled {
			// Closed under the lock that Send takes: a prompt queued
			// while the timer fired is taken instead, never dropped.
			if !s.closed {
				s.closed, s.closedWhy = true, ended("was idle for "+idle.String()+" and "+idleEnd)
			}
			s.mu.Unlock()
			return "", 0, false
		}
		if len(s.queue) > 0 {
			prompt, s.queue = s.queue[0], s.queue[1:]
			turn = s.turn - len(s.queue)
			s.waiting = false
			select { // an interrupt of the last turn is not this one's
			case <-s.interrupt:
			default:
			}
			s.mu.Unlock()
			return prompt, turn, true
		}
		s.mu.Unlock()
		select {
		case <-s.wake:
		case <-t.C:
			idled = true
		case <-ctx.Done():
			s.Close(ended("ended: " + context.Cause(ctx).Error()))
			return "", 0, false
		}
		s.mu.Lock()
	}
}

// Waiting reports whether the session is between turns, waiting in Next:
// its agent is idle, not stalled.
func (s *Session) Waiting() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.waiting
}

// Close ends the session: every later Send, Interrupt and Answer gets why
// (SessionEnded when nil), and every pending Ask is left to its adapter's
// own ending. Prompts still queued are dropped with it: Close is called
// when the run ends, so nothing accepted waits on it (Next closes only
// with an empty queue).
func (s *Session) Close(why *wire.Error) {
	if why == nil {
		why = ended("has ended")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.closed, s.closedWhy = true, why
	}
}

// Ask registers the permission request id with its options and returns
// the channel its answer's option id arrives on. Resolve the request when
// it ends otherwise (a timeout, a cancel).
func (s *Session) Ask(id string, options []PermissionOption) <-chan string {
	a := &ask{options: options, answer: make(chan string, 1)}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.asks[id] = a
	return a.answer
}

// Resolve ends the request id without an answer; a later Answer gets why.
func (s *Session) Resolve(id string, why *wire.Error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.asks[id]; ok {
		delete(s.asks, id)
		s.done[id] = why
	}
}

// Answer answers the permission request id: with optionID when set (it
// must be one of the request's options and agree with allow), else with
// the first option that allows (allow_once before allow_always) or
// rejects (reject_once before reject_always). It returns the chosen
// option's id.
func (s *Session) Answer(id string, allow bool, optionID string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.asks[id]
	if !ok {
		if why, ok := s.done[id]; ok {
			return "", why
		}
		if s.closed {
			return "", s.closedWhy
		}
		return "", wire.Errorf(wire.AgenticRequestValidationError, "permission: no request %.64q is pending in this session", id)
	}
	chosen, err := choose(a.options, allow, optionID)
	if err != nil {
		return "", err
	}
	delete(s.asks, id)
	s.done[id] = wire.Errorf(wire.AgenticRequestValidationError, "permission: request %.64q was already answered (%s)", id, chosen)
	a.answer <- chosen
	return chosen, nil
}

func choose(options []PermissionOption, allow bool, optionID string) (string, error) {
	if optionID != "" {
		for _, o := range options {
			if o.ID == optionID {
				if o.Allows() != allow {
					return "", wire.Errorf(wire.AgenticRequestValidationError, "permission: option %.64q is of kind %s, which does not %s", optionID, o.Kind, map[bool]string{true: "allow", false: "deny"}[allow])
				}
				return o.ID, nil
			}
		}
		return "", wire.Errorf(wire.AgenticRequestValidationError, "permission: the request has no option %.64q", optionID)
	}
	if id := Choose(options, allow); id != "" {
		return id, nil
	}
	return "", wire.Errorf(wire.AgenticRequestValidationError, "permission: the request offers no option that %s", map[bool]string{true: "allows", false: "denies"}[allow])
}

// Choose is the option an answer of allow picks among options without
// naming one: the first of kind allow_once, else allow_always (or
// reject_once, else reject_always); "" when there is none.
func Choose(options []PermissionOption, allow bool) string {
	kinds := [2]string{"reject_once", "reject_always"}
	if allow {
		kinds = [2]string{"allow_once", "allow_always"}
	}
	for _, k := range kinds {
		for _, o := range options {
			if o.Kind == k {
				return o.ID
			}
		}
	}
	return ""
}
