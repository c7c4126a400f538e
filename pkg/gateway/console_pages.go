package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/big"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentmesh/agentmesh/pkg/artifacts"
	"github.com/agentmesh/agentmesh/pkg/client"
	"github.com/agentmesh/agentmesh/pkg/ledger"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
)

// The console's pages (console.go has its routes and auth).

// consoleStates are the state filter's values: "live" (any state not
// terminal) and every run state.
var consoleStates = []string{"live", "accepted", "routed", "running", "succeeded", "failed", "cancelled", "timed_out", "rejected"}

// runsPage is the runs list's data.
type runsPage struct {
	Tenant, State, Profile, Adapter string
	Limit                           int
	Runs                            []wire.RunRecord
	Next                            string // the next page's URL, "" for none
	Capped                          bool
	Scanned                         int
	States, Profiles, Adapters      []string
	Tenants                         []string // an operator's choice
	TookMS                          string
	// LiveURL is the list's live stream with the same filters; First
	// says the page is the list's first (no cursor), where new runs show.
	LiveURL string
	First   bool
}

// adapters is every adapter a profile names, sorted.
func (g *Gateway) adapterNames() []string {
	set := map[string]bool{}
	for _, n := range g.profiles.Names() {
		if p, ok := g.profiles.Get(n); ok && p.Adapter != "" {
			set[p.Adapter] = true
		}
	}
	return slices.Sorted(maps.Keys(set))
}

func (g *Gateway) consoleRuns(w http.ResponseWriter, r *http.Request, c *console, who consoleWho) {
	start := time.Now()
	q, e := consoleQuery(r, "tenant", "state", "profile", "adapter", "limit", "cursor")
	var f runFilter
	var limit int
	var after *runCursor
	if e == nil {
		f, e = runsFilter(q, who)
	}
	if e == nil {
		limit, e = intParam(q, "limit", 1, consoleMaxLimit, consoleDefaultLimit)
	}
	if e == nil && q.Get("cursor") != "" {
		cur, err := parseCursor(q.Get("cursor"))
		if err != nil {
			e = invalid("cursor", "cursor %q: %v", q.Get("cursor"), err)
		}
		after = &cur
	}
	if e != nil {
		g.consoleError(w, r, &who, e)
		return
	}
	page, err := c.index.query(f, after, limit)
	if err != nil {
		g.consoleError(w, r, &who, apiErr(http.StatusServiceUnavailable, typeUnavailable, "index_unavailable", "", "%v", err))
		return
	}
	data := runsPage{Tenant: f.tenant, State: f.state, Profile: f.profile, Adapter: f.adapter, Limit: limit,
		Runs: g.currentRuns(r.Context(), page.Runs, f.state), Capped: page.Capped, Scanned: page.Scanned,
		States: consoleStates, Profiles: g.profiles.Names(), Adapters: g.adapterNames()}
	if who.Operator {
		data.Tenants = c.index.tenants()
		if len(data.Tenants) > consoleMaxListed {
			data.Tenants = data.Tenants[:consoleMaxListed]
		}
	} else {
		data.Tenant = who.Tenant
	}
	// The filters, as the live stream's and the next page's query.
	filters := func() url.Values {
		v := url.Values{}
		for k, s := range map[string]string{"state": f.state, "profile": f.profile, "adapter": f.adapter} {
			if s != "" {
				v.Set(k, s)
			}
		}
		if who.Operator && f.tenant != "" {
			v.Set("tenant", f.tenant)
		}
		return v
	}
	data.LiveURL, data.First = "/console/runs/live?"+filters().Encode(), after == nil
	if page.Next != "" {
		v := filters()
		v.Set("cursor", page.Next)
		if limit != consoleDefaultLimit {
			v.Set("limit", strconv.Itoa(limit))
		}
		data.Next = "/console/runs?" + v.Encode()
	}
	data.TookMS = fmt.Sprintf("%.2f", float64(time.Since(start).Microseconds())/1000)
	g.consoleRender(w, http.StatusOK, "runs", pageData{Title: "Runs", Nav: "runs", Who: &who, Page: data})
}

// runsFilter reads the runs list's filters: tenant (who's own unless an
// operator's), state, profile and adapter.
func runsFilter(q url.Values, who consoleWho) (runFilter, *APIError) {
	var f runFilter
	var e *APIError
	if f.tenant, e = tenantParam(q, who); e != nil {
		return f, e
	}
	f.state = q.Get("state")
	if f.state != "" && !slices.Contains(consoleStates, f.state) {
		return f, invalid("state", "state %q is not one of %s", f.state, strings.Join(consoleStates, ", "))
	}
	if f.profile, e = nameParam(q, "profile"); e != nil {
		return f, e
	}
	f.adapter, e = nameParam(q, "adapter")
	return f, e
}

// liveRow is one run as the live runs list sends it: the row's cells,
// and whether the run is (still) one the list's filters keep.
type liveRow struct {
	Key       string            `json:"key"` // <tenant>/<run_id>, the row's identity
	RunID     string            `json:"run_id"`
	Tenant    string            `json:"tenant"`
	Created   string            `json:"created"`
	CreatedMS int64             `json:"created_ms"`
	State     string            `json:"state"`
	Error     string            `json:"error,omitempty"` // the error's class
	Profile   string            `json:"profile"`
	Adapter   string            `json:"adapter"`
	Principal string            `json:"principal"`
	Cost      string            `json:"cost"`
	Labels    map[string]string `json:"labels,omitempty"`
	Match     bool              `json:"match"`
}

func liveRowOf(rec wire.RunRecord, match bool) liveRow {
	row := liveRow{Key: rec.Tenant + "/" + rec.RunID, RunID: rec.RunID, Tenant: rec.Tenant, Created: consoleTime(rec.Created), CreatedMS: rec.Created,
		State: string(rec.State), Profile: rec.Profile, Adapter: rec.Adapter, Principal: rec.Principal, Cost: rec.Cost, Labels: rec.Labels, Match: match}
	if rec.Error != nil {
		row.Error = string(rec.Error.Class)
	}
	return row
}

// How the live runs list follows: a run not ended is looked at again
// every liveRecheck for a state its record does not say (running), at
// most liveTracked of them; a comment goes out every liveHeartbeat.
const (
	liveRecheck   = 2 * time.Second
	liveTracked   = consoleDefaultLimit
	liveHeartbeat = 15 * time.Second
)

// consoleRunsLive is the runs list's live stream (GET /console/runs/live,
// server-sent events, the page's EventSource): a "run" event (liveRow)
// for every run its filters and its key's tenant keep, as the index sees
// it written (a new run, a state its record now says), and for a run the
// stream has seen not ended, its state now when its events say another
// (running); match false says the run left the filters. A stream that
// falls behind the index is sent "reload" and ends.
func (g *Gateway) consoleRunsLive(w http.ResponseWriter, r *http.Request, c *console, who consoleWho) {
	q, e := consoleQuery(r, "tenant", "state", "profile", "adapter")
	var f runFilter
	if e == nil {
		f, e = runsFilter(q, who)
	}
	if e != nil {
		writeError(w, e)
		return
	}
	// The stream's runs are the ones the filters keep whatever their
	// state; the state filter is applied to each run's state now.
	base := f
	base.state = ""
	ctx := r.Context()
	updates, stop := c.index.subscribe()
	defer stop()
	// The runs not ended on the list's first page now: their records say
	// accepted or routed while their events may move on.
	tracked := map[string]wire.RunRecord{}
	track := func(rec wire.RunRecord) {
		key := rec.Tenant + "/" + rec.RunID
		if rec.State.Terminal() {
			delete(tracked, key)
		} else if _, ok := tracked[key]; ok || len(tracked) < liveTracked {
			tracked[key] = rec
		}
	}
	if pg, err := c.index.query(base, nil, consoleDefaultLimit); err == nil {
		for _, rec := range g.currentRuns(ctx, pg.Runs, "") {
			track(rec)
		}
	}
	s := newSSE(w, "")
	s.open()
	send := func(rec wire.RunRecord) bool {
		match := f.keep(&rec) && (f.state == "" || f.state == "live" || string(rec.State) == f.state)
		return s.send("run", liveRowOf(rec, match))
	}
	recheck := time.NewTicker(liveRecheck)
	defer recheck.Stop()
	beat := time.NewTicker(liveHeartbeat)
	defer beat.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-beat.C:
			if !s.comment("keep-alive") {
				return
			}
		case rec, ok := <-updates:
			if !ok {
				s.send("reload", map[string]string{"why": "the list fell behind the runs it follows"})
				return
			}
			if !base.keep(&rec) || !who.sees(rec.Tenant) {
				continue
			}
			if !rec.State.Terminal() {
				if now, err := g.client.Current(ctx, rec); err == nil {
					rec = now
				}
			}
			track(rec)
			if !send(rec) {
				return
			}
		case <-recheck.C:
			for _, rec := range tracked {
				now, err := g.client.Current(ctx, rec)
				if err != nil || now.State == rec.State {
					continue
				}
				track(now)
				if !send(now) {
					return
				}
			}
		}
	}
}

// currentRuns gives each run of a page not ended its state now, from its
// last event (a stored record says accepted or routed until the run
// ends; its events say who runs it): one direct get per such run, at
// most a page's. With state a state not terminal, it keeps the runs now
// in it.
func (g *Gateway) currentRuns(ctx context.Context, recs []wire.RunRecord, state string) []wire.RunRecord {
	out := recs[:0]
	for _, rec := range recs {
		if !rec.State.Terminal() {
			if now, err := g.client.Current(ctx, rec); err == nil {
				rec = now
			}
		}
		if state != "" && state != "live" && !wire.State(state).Terminal() && string(rec.State) != state {
			continue
		}
		out = append(out, rec)
	}
	return out
}

// runTenant checks the {tenant} and {id} of a run's console URL: a
// tenant who may not see is, as in the runs API, a run not found.
func runTenant(r *http.Request, who consoleWho) (tenant, id string, e *APIError) {
	tenant, id = r.PathValue("tenant"), r.PathValue("id")
	if err := subject.ValidToken("tenant", tenant); err != nil {
		return "", "", invalid("tenant", "%v", err)
	}
	if err := subject.ValidToken("run_id", id); err != nil {
		return "", "", invalid("run_id", "%v", err)
	}
	if !who.sees(tenant) {
		return "", "", notFound(id)
	}
	return tenant, id, nil
}

// runView is a run's page's data.
type runView struct {
	Rec       wire.RunRecord
	Request   string // the run's request as JSON, when the record keeps it (a consented run)
	Labels    []string
	Artifacts []artifacts.Record
	// ArtifactsError says why the artifacts could not be listed.
	ArtifactsError string
	// ArtifactsURL is the prefix of an artifact's download link: the
	// runs API's bytes, through the console's auth.
	ArtifactsURL string
	// FirstPrompt is the run's prompt, which a session's first turn
	// answers, when the record keeps the request (a consented run).
	FirstPrompt string
	// HistoryURL is the run's conversation's history, "" for none.
	HistoryURL string
	EventsURL  string
	CancelURL  string
}

func (g *Gateway) consoleRun(w http.ResponseWriter, r *http.Request, c *console, who consoleWho) {
	if _, e := consoleQuery(r); e != nil {
		g.consoleError(w, r, &who, e)
		return
	}
	tenant, id, e := runTenant(r, who)
	if e != nil {
		g.consoleError(w, r, &who, e)
		return
	}
	rec, err := g.client.Status(r.Context(), tenant, id)
	switch {
	case errors.Is(err, client.ErrNotFound):
		g.consoleError(w, r, &who, notFound(id))
		return
	case err != nil:
		g.consoleError(w, r, &who, asAPIError(err))
		return
	}
	runURL := "/console/runs/" + tenant + "/" + id
	v := runView{Rec: rec, EventsURL: runURL + "/events", CancelURL: runURL + "/cancel", ArtifactsURL: runURL + "/artifacts/"}
	if rec.Conversation != "" {
		v.HistoryURL = "/console/conversations/" + tenant + "/" + url.PathEscape(rec.Conversation) + "/history"
	}
	if len(rec.Request) > 0 {
		var m map[string]any
		if err := wire.DecodeStrict(rec.Request, &m); err == nil {
			if p, ok := m["prompt"].(string); ok {
				v.FirstPrompt = p
			}
			var b strings.Builder
			enc := json.NewEncoder(&b)
			enc.SetEscapeHTML(false) // the template escapes it, as text
			enc.SetIndent("", "  ")
			if enc.Encode(m) == nil {
				v.Request = b.String()
			}
		}
	}
	for _, k := range slices.Sorted(maps.Keys(rec.Labels)) {
		v.Labels = append(v.Labels, k+"="+rec.Labels[k])
	}
	if g.artifacts == nil {
		v.ArtifactsError = "This gateway serves no artifacts."
	} else if recs, err := g.artifacts.List(r.Context(), tenant, id); err != nil && !errors.Is(err, artifacts.ErrNotFound) {
		v.ArtifactsError = "The artifacts could not be listed: " + err.Error()
	} else {
		v.Artifacts = recs
	}
	g.consoleRender(w, http.StatusOK, "run", pageData{Title: "Run " + id, Nav: "runs", Who: &who, Page: v})
}

// asRunsAPI serves a run's console URL with h, a runs API handler
// (runEvents, cancelRun), as the run's tenant when who may see it: the
// run page's EventSource and cancel button, which come with the cookie
// (an EventSource cannot send the header). Its answers are the API's
// (JSON, or the event stream).
func (g *Gateway) asRunsAPI(endpoint string, h func(w http.ResponseWriter, r *http.Request, who caller)) func(http.ResponseWriter, *http.Request, *console, consoleWho) {
	return func(w http.ResponseWriter, r *http.Request, _ *console, who consoleWho) {
		tenant, _, e := runTenant(r, who)
		if e != nil {
			writeError(w, e)
			return
		}
		h(w, r, who.as(tenant, endpoint, r))
	}
}

// as is who calling a runs API handler as tenant's key.
func (w consoleWho) as(tenant, endpoint string, r *http.Request) caller {
	return caller{Key: Key{Tenant: tenant, Principal: w.Principal, ID: w.ID}, endpoint: endpoint, arrived: arrivedAt(r)}
}

// consoleHistory serves a conversation's history, the runs API's
// (conversationHistory), to a key that may see its tenant: the run page's
// link. A tenant it may not see is a conversation not found.
func (g *Gateway) consoleHistory(w http.ResponseWriter, r *http.Request, _ *console, who consoleWho) {
	tenant := r.PathValue("tenant")
	if err := subject.ValidToken("tenant", tenant); err != nil {
		writeError(w, invalid("tenant", "%v", err))
		return
	}
	if !who.sees(tenant) {
		writeError(w, historyNotFound(r.PathValue("id")))
		return
	}
	g.conversationHistory(w, r, who.as(tenant, "GET /console/conversations/{tenant}/{id}/history", r))
}

// spendPage is the spend chart's data.
type spendPage struct {
	Tenant string // "" for an operator's view of every tenant
	By     string // "principal" or "tenant"
	Days   int
	Since  string
	Until  string
	Chart  spendChart
	Rows   []spendRow
	Total  string
	Capped bool
}

// spendRow is one series' day.
type spendRow struct {
	Day, Series string
	Runs        int64
	Cost        string
}

// spendChart is a stacked bar chart, laid out here: the template only
// writes the numbers out.
type spendChart struct {
	Width, Height int
	Bars          []spendBar
	Legend        []spendLegend
	Max           string
}

type spendBar struct {
	X, W    int
	Label   string
	LabelX  int
	Total   string
	Segment []spendSegment
}

type spendSegment struct {
	Y, H   int
	Fill   string
	Series string
	Cost   string
}

type spendLegend struct {
	Series string
	Fill   string
	Y      int
}

// palette are the chart's fills, in order of the series.
var palette = []string{"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"}

func (g *Gateway) consoleSpend(w http.ResponseWriter, r *http.Request, c *console, who consoleWho) {
	tenant, days, e := tenantAndInt(r, who, "days", 1, consoleMaxDays, consoleDefaultDays)
	if e != nil {
		g.consoleError(w, r, &who, e)
		return
	}
	now := time.Now().UTC()
	from := now.AddDate(0, 0, -(days - 1))
	dayKeys := ledger.Days(from, now)
	data := spendPage{Tenant: tenant, Days: days, Since: from.Format(time.DateOnly), Until: now.Format(time.DateOnly)}
	// series[day][name] is the cost of a principal (one tenant) or a tenant (every tenant).
	series := map[string]map[string]ledger.Sum{}
	add := func(day, name string, s ledger.Sum) {
		if s.Runs == 0 {
			return
		}
		if series[day] == nil {
			series[day] = map[string]ledger.Sum{}
		}
		cur := series[day][name]
		cur.Add(s)
		series[day][name] = cur
	}
	ctx := r.Context()
	if tenant != "" {
		data.By = "principal"
		byDay, err := c.ledger.Range(ctx, tenant, dayKeys)
		if err != nil {
			g.consoleError(w, r, &who, asAPIError(err))
			return
		}
		for d, sp := range byDay {
			for p, ps := range sp.Principals {
				add(d, p, ps.Total)
			}
		}
	} else {
		data.By = "tenant"
		tenants, capped, err := c.spendTenants(ctx, dayKeys)
		if err != nil {
			g.consoleError(w, r, &who, asAPIError(err))
			return
		}
		data.Capped = capped
		// The tenants' ranges at once, a few at a time: two reads a day each.
		byTenant := make([]map[string]*ledger.Spend, len(tenants))
		errs := make([]error, len(tenants))
		var wg sync.WaitGroup
		sem := make(chan struct{}, 8)
		for i, t := range tenants {
			wg.Go(func() {
				sem <- struct{}{}
				defer func() { <-sem }()
				byTenant[i], errs[i] = c.ledger.Range(ctx, t, dayKeys)
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			g.consoleError(w, r, &who, asAPIError(err))
			return
		}
		for i, t := range tenants {
			for d, sp := range byTenant[i] {
				add(d, t, sp.Total())
			}
		}
	}
	var total ledger.Sum
	for _, d := range dayKeys {
		for _, name := range slices.Sorted(maps.Keys(series[d])) {
			s := series[d][name]
			total.Add(s)
			t, _ := ledger.ParseDay(d)
			data.Rows = append(data.Rows, spendRow{Day: t.Format(time.DateOnly), Series: name, Runs: s.Runs, Cost: s.CostString()})
		}
	}
	data.Total = total.CostString()
	data.Chart = layoutChart(dayKeys, series)
	g.consoleRender(w, http.StatusOK, "spend", pageData{Title: "Spend", Nav: "spend", Who: &who, Page: data})
}

// spendTenants are the tenants with a rollup on one of days (the ledger
// bucket's keys <tenant>.<day>), at most consoleMaxTenants.
func (c *console) spendTenants(ctx context.Context, days []string) ([]string, bool, error) {
	filters := make([]string, len(days))
	for i, d := range days {
		filters[i] = "*." + d
	}
	l, err := c.ledgerKV.ListKeysFiltered(ctx, filters...)
	if errors.Is(err, jetstream.ErrNoKeysFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("list the ledger's rollups: %w", err)
	}
	set := map[string]bool{}
	for k := range l.Keys() {
		if t, _, ok := strings.Cut(k, "."); ok {
			set[t] = true
		}
	}
	_ = l.Stop()
	out := slices.Sorted(maps.Keys(set))
	if len(out) > consoleMaxTenants {
		return out[:consoleMaxTenants], true, nil
	}
	return out, false, nil
}

func ratFloat(s ledger.Sum) float64 {
	if s.Cost == nil {
		return 0
	}
	f, _ := s.Cost.Float64()
	return f
}

// layoutChart lays out one stacked bar a day, a segment a series.
func layoutChart(days []string, series map[string]map[string]ledger.Sum) spendChart {
	const width, height, top, bottom, left, legendW = 760, 260, 10, 30, 10, 170
	ch := spendChart{Width: width, Height: height}
	names := map[string]bool{}
	maxDay := 0.0
	maxRat := new(big.Rat)
	for _, d := range days {
		sum := 0.0
		dayRat := new(big.Rat)
		for n, s := range series[d] {
			names[n] = true
			sum += ratFloat(s)
			if s.Cost != nil {
				dayRat.Add(dayRat, s.Cost)
			}
		}
		if sum > maxDay {
			maxDay, maxRat = sum, dayRat
		}
	}
	ch.Max = (&ledger.Sum{Cost: maxRat}).CostString()
	order := slices.Sorted(maps.Keys(names))
	fill := map[string]string{}
	for i, n := range order {
		fill[n] = palette[i%len(palette)]
		if i < 12 {
			ch.Legend = append(ch.Legend, spendLegend{Series: n, Fill: fill[n], Y: top + 14*i})
		}
	}
	plotW := width - left - legendW
	plotH := height - top - bottom
	slot := plotW / max(len(days), 1)
	for i, d := range days {
		t, _ := ledger.ParseDay(d)
		b := spendBar{X: left + i*slot + slot/8, W: max(slot*3/4, 1), Label: t.Format("01-02"), LabelX: left + i*slot + slot/2}
		var dayTotal ledger.Sum
		y := top + plotH
		for _, n := range order {
			s, ok := series[d][n]
			if !ok {
				continue
			}
			dayTotal.Add(s)
			h := 0
			if maxDay > 0 {
				h = int(ratFloat(s) / maxDay * float64(plotH))
			}
			y -= h
			b.Segment = append(b.Segment, spendSegment{Y: y, H: h, Fill: fill[n], Series: n, Cost: s.CostString()})
		}
		b.Total = dayTotal.CostString()
		ch.Bars = append(ch.Bars, b)
	}
	return ch
}

// runnerRow is one runner host, as micro and its stats say.
type runnerRow struct {
	ID, RunnerID, Version string
	Adapters              []string
	MaxActive             string
	Deliveries, Ended     uint64
	InFlight              uint64
}

// poolRow is one adapter's pool: its runners' slots and its work
// consumer's queue.
type poolRow struct {
	Adapter        string
	Runners        int
	Slots          int
	Active, Free   int
	Queued         uint64
	ConsumerExists bool
}

type runnersPage struct {
	Runners []runnerRow
	Pools   []poolRow
	Errors  []string
}

// microReplies sends a micro control request (verb) to every
// agentmesh-runner and collects the answers: until none has come for
// microIdle after the last one, or microWait in all.
func (c *console) microReplies(ctx context.Context, verb micro.Verb) ([][]byte, error) {
	subj, err := micro.ControlSubject(verb, "agentmesh-runner", "")
	if err != nil {
		return nil, err
	}
	inbox := c.nc.NewInbox()
	sub, err := c.nc.SubscribeSync(inbox)
	if err != nil {
		return nil, err
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := c.nc.PublishRequest(subj, inbox, nil); err != nil {
		return nil, err
	}
	var out [][]byte
	deadline := time.Now().Add(microWait)
	for len(out) < consoleMaxListed && ctx.Err() == nil {
		left := time.Until(deadline)
		if len(out) > 0 {
			left = min(left, microIdle)
		}
		if left <= 0 {
			break
		}
		m, err := sub.NextMsg(left)
		if err != nil {
			break
		}
		out = append(out, m.Data)
	}
	return out, nil
}

// How long the runners page waits for the runners' micro answers: the
// first within microWait, each next within microIdle of the last.
const (
	microWait = 150 * time.Millisecond
	microIdle = 25 * time.Millisecond
)

func (g *Gateway) consoleRunners(w http.ResponseWriter, r *http.Request, c *console, who consoleWho) {
	if _, e := consoleQuery(r); e != nil {
		g.consoleError(w, r, &who, e)
		return
	}
	if !who.Operator {
		g.consoleError(w, r, &who, apiErr(http.StatusForbidden, "permission_error", "operator_only", "", "the runner pools are every tenant's: an operator key sees them"))
		return
	}
	ctx := r.Context()
	var data runnersPage
	var infos, stats [][]byte
	var infoErr, statsErr error
	var wg sync.WaitGroup
	wg.Go(func() { infos, infoErr = c.microReplies(ctx, micro.InfoVerb) })
	wg.Go(func() { stats, statsErr = c.microReplies(ctx, micro.StatsVerb) })
	wg.Wait()
	if infoErr != nil {
		data.Errors = append(data.Errors, fmt.Sprintf("micro info: %v", infoErr))
	}
	if statsErr != nil {
		data.Errors = append(data.Errors, fmt.Sprintf("micro stats: %v", statsErr))
	}
	counts := map[string]map[string]uint64{}
	for _, b := range stats {
		var st micro.Stats
		if json.Unmarshal(b, &st) != nil {
			continue
		}
		for _, ep := range st.Endpoints {
			var m map[string]uint64
			if json.Unmarshal(ep.Data, &m) == nil && m != nil {
				counts[st.ID] = m
				break
			}
		}
	}
	pools := map[string]*poolRow{}
	for _, b := range infos {
		var in micro.Info
		if json.Unmarshal(b, &in) != nil {
			continue
		}
		row := runnerRow{ID: in.ID, RunnerID: in.Metadata["runner_id"], Version: in.Version, MaxActive: in.Metadata["max_active"]}
		if a := in.Metadata["adapters"]; a != "" {
			row.Adapters = strings.Split(a, ",")
		}
		if m := counts[in.ID]; m != nil {
			row.Deliveries, row.Ended = m["deliveries"], m["runs_ended"]
			if row.Deliveries > row.Ended {
				row.InFlight = row.Deliveries - row.Ended
			}
		}
		for _, part := range strings.Split(row.MaxActive, ",") {
			name, n, ok := strings.Cut(part, ":")
			if !ok {
				continue
			}
			p := pools[name]
			if p == nil {
				p = &poolRow{Adapter: name}
				pools[name] = p
			}
			p.Runners++
			if k, err := strconv.Atoi(n); err == nil {
				p.Slots += k
			}
		}
		data.Runners = append(data.Runners, row)
	}
	slices.SortFunc(data.Runners, func(a, b runnerRow) int { return strings.Compare(a.RunnerID+a.ID, b.RunnerID+b.ID) })
	for _, name := range slices.Sorted(maps.Keys(pools)) {
		p := pools[name]
		if cons, err := c.js.Consumer(ctx, c.names.WorkStream(), c.names.WorkConsumer(name)); err == nil {
			if info, err := cons.Info(ctx); err == nil {
				p.ConsumerExists = true
				p.Active = info.NumAckPending
				p.Queued = info.NumPending
			}
		}
		p.Free = max(p.Slots-p.Active, 0)
		data.Pools = append(data.Pools, *p)
	}
	g.consoleRender(w, http.StatusOK, "runners", pageData{Title: "Runners", Nav: "runners", Who: &who, Page: data})
}

// exportsPage is the exports and artifacts page's data.
type exportsPage struct {
	Tenant         string
	Exports        []wire.ExportRecord
	MoreExports    bool
	Artifacts      []artifacts.Record
	MoreArtifacts  bool
	ArtifactsError string
}

func (g *Gateway) consoleExports(w http.ResponseWriter, r *http.Request, c *console, who consoleWho) {
	tenant, limit, e := tenantAndInt(r, who, "limit", 1, consoleMaxLimit, consoleDefaultLimit)
	if e != nil {
		g.consoleError(w, r, &who, e)
		return
	}
	ctx := r.Context()
	data := exportsPage{Tenant: tenant}
	ents, more, err := c.exports.ListN(ctx, tenant, limit)
	if err != nil && !errors.Is(err, jetstream.ErrNoKeysFound) {
		g.consoleError(w, r, &who, asAPIError(err))
		return
	}
	data.MoreExports = more
	for _, en := range ents {
		data.Exports = append(data.Exports, en.Record)
	}
	if g.artifacts == nil {
		data.ArtifactsError = "this gateway serves no artifacts"
	} else {
		recs, more, err := g.artifacts.Tenant(ctx, tenant, limit)
		if err != nil {
			g.consoleError(w, r, &who, asAPIError(err))
			return
		}
		data.Artifacts, data.MoreArtifacts = recs, more
	}
	g.consoleRender(w, http.StatusOK, "exports", pageData{Title: "Exports and artifacts", Nav: "exports", Who: &who, Page: data})
}
