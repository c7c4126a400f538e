package main

// The operator's trajectory export commands: consent, redaction rules and
// exports (docs/contract.md §7). They talk to the mesh's JetStream directly, so they
// need the mesh account's credentials, not a tenant's; redaction check is
// offline.

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"text/tabwriter"
	"time"

	"github.com/agentmesh/agentmesh/pkg/exporter"
	"github.com/agentmesh/agentmesh/pkg/exporter/redact"
	"github.com/agentmesh/agentmesh/pkg/exporter/trajstore"
	"github.com/agentmesh/agentmesh/pkg/exports"
	"github.com/agentmesh/agentmesh/pkg/exports/consent"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/sweeper"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// opsConn is an operator command's connection to the mesh's JetStream.
type opsConn struct {
	nc    *nats.Conn
	js    jetstream.JetStream
	names subject.Names
}

func (c *clientFlags) ops() (*opsConn, error) {
	nc, _, err := c.connect()
	if err != nil {
		return nil, err
	}
	var js jetstream.JetStream
	if c.apiPrefix != "" {
		js, err = jetstream.NewWithAPIPrefix(nc, c.apiPrefix)
	} else {
		js, err = jetstream.New(nc)
	}
	if err != nil {
		nc.Close()
		return nil, usageErr("jetstream: %v", err)
	}
	return &opsConn{nc: nc, js: js, names: subject.Names{Prefix: c.prefix}}, nil
}

// withOps connects to the mesh's JetStream (ops) and calls do with ctx
// bounded by the request timeout; the connection is closed when do returns.
func (c *clientFlags) withOps(ctx context.Context, do func(ctx context.Context, oc *opsConn) error) error {
	oc, err := c.ops()
	if err != nil {
		return err
	}
	defer oc.nc.Close()
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	return do(ctx, oc)
}

// opsFlags parses the flags of the operator command name: the client
// flags and those extra adds (nil for none). It returns the flags and the
// positional arguments.
func opsFlags(name, synopsis string, args []string, io *stdio, extra func(fs *flag.FlagSet)) (*clientFlags, []string, error) {
	var f clientFlags
	fs := newFlagSet(name, synopsis, io)
	f.register(fs, io)
	if extra != nil {
		extra(fs)
	}
	pos, err := parse(fs, args)
	if err != nil {
		return nil, nil, err
	}
	return &f, pos, nil
}

// subcommand runs the subcommand args[0] of name from subs.
func subcommand(ctx context.Context, name string, args []string, io *stdio, subs map[string]func(context.Context, []string, *stdio) error, order ...string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintf(io.stderr, "usage: agentmesh %s <%s> [flags]\n", name, joinBar(order))
		if len(args) == 0 {
			return &exitError{code: exitUsage}
		}
		// Each subcommand's own usage and flags, as its -h prints them
		// (a -h does nothing else).
		for _, sub := range order {
			fmt.Fprintln(io.stderr)
			_ = subs[sub](ctx, []string{"-h"}, io)
		}
		return nil
	}
	sub, ok := subs[args[0]]
	if !ok {
		return usageErr("%s: unknown subcommand %q (want %s)", name, args[0], joinBar(order))
	}
	return sub(ctx, args[1:], io)
}

func joinBar(s []string) string {
	out := ""
	for i, v := range s {
		if i > 0 {
			out += "|"
		}
		out += v
	}
	return out
}

// cmdConsent grants, withdraws or shows a principal's export consent.
func cmdConsent(ctx context.Context, args []string, io *stdio) error {
	do := func(verb string) func(context.Context, []string, *stdio) error {
		return func(ctx context.Context, args []string, io *stdio) error {
			var asJSON *bool
			f, pos, err := opsFlags("consent "+verb, "--tenant T --principal P", args, io, func(fs *flag.FlagSet) {
				asJSON = fs.Bool("json", false, "print the consent as JSON")
			})
			if err != nil {
				return err
			}
			if len(pos) > 0 {
				return usageErr("consent %s: unexpected argument %q", verb, pos[0])
			}
			var st consent.State
			if err := f.withOps(ctx, func(ctx context.Context, oc *opsConn) error {
				store, err := consent.Open(ctx, oc.js, oc.names)
				if err != nil {
					return usageErr("%v", err)
				}
				switch verb {
				case "grant":
					st, err = store.Grant(ctx, f.tenant, f.principal)
				case "withdraw":
					st, err = store.Withdraw(ctx, f.tenant, f.principal)
				default:
					st, err = store.Get(ctx, f.tenant, f.principal)
				}
				if err != nil {
					return &exitError{code: exitFail, err: err}
				}
				return nil
			}); err != nil {
				return err
			}
			if *asJSON {
				return json.NewEncoder(io.stdout).Encode(st)
			}
			state := "not granted"
			if st.Granted {
				state = "granted"
			} else if st.LastWithdrawal > 0 {
				state = "withdrawn"
			}
			fmt.Fprintf(io.stdout, "%s/%s: %s (revision %d)\n", st.Tenant, st.Principal, state, st.Rev)
			if verb == "withdraw" {
				fmt.Fprintln(io.stdout, "exports made under earlier grants are expired; the next sweep removes them (agentmesh exports sweep)")
			}
			return nil
		}
	}
	return subcommand(ctx, "consent", args, io, map[string]func(context.Context, []string, *stdio) error{
		"grant": do("grant"), "withdraw": do("withdraw"), "show": do("show"),
	}, "grant", "withdraw", "show")
}

// readRules reads and validates a rules file, printing each refused rule.
func readRules(path string, io *stdio) ([]redact.Rule, error) {
	if path == "" {
		return nil, usageErr("--file is required")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, usageErr("read %s: %v", path, err)
	}
	rules, err := redact.ParseRules(b)
	if err != nil {
		var multi interface{ Unwrap() []error }
		if errors.As(err, &multi) {
			for _, e := range multi.Unwrap() {
				fmt.Fprintf(io.stderr, "%s: %v\n", path, e)
			}
		} else {
			fmt.Fprintf(io.stderr, "%s: %v\n", path, err)
		}
		return nil, &exitError{code: exitFail, err: fmt.Errorf("%s: refused; nothing stored", path)}
	}
	return rules, nil
}

// cmdRedaction sets, shows or checks a tenant's redaction rules.
func cmdRedaction(ctx context.Context, args []string, io *stdio) error {
	set := func(ctx context.Context, args []string, io *stdio) error {
		var file *string
		f, _, err := opsFlags("redaction set", "--tenant T --file rules.yaml", args, io, func(fs *flag.FlagSet) {
			file = fs.String("file", "", "YAML list of {name, pattern}")
		})
		if err != nil {
			return err
		}
		rules, err := readRules(*file, io)
		if err != nil {
			return err
		}
		return f.withOps(ctx, func(ctx context.Context, oc *opsConn) error {
			store, err := exporter.OpenRules(ctx, oc.js, oc.names)
			if err != nil {
				return usageErr("%v", err)
			}
			if err := store.Set(ctx, f.tenant, rules); err != nil {
				return &exitError{code: exitFail, err: err}
			}
			fmt.Fprintf(io.stdout, "%s: %d redaction rules stored; exporters apply them to the next trajectory\n", f.tenant, len(rules))
			return nil
		})
	}
	show := func(ctx context.Context, args []string, io *stdio) error {
		f, _, err := opsFlags("redaction show", "--tenant T", args, io, nil)
		if err != nil {
			return err
		}
		var rules []redact.Rule
		if err := f.withOps(ctx, func(ctx context.Context, oc *opsConn) error {
			store, err := exporter.OpenRules(ctx, oc.js, oc.names)
			if err != nil {
				return usageErr("%v", err)
			}
			if rules, err = store.Get(ctx, f.tenant); err != nil {
				return &exitError{code: exitFail, err: err}
			}
			return nil
		}); err != nil {
			return err
		}
		tw := tabwriter.NewWriter(io.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tPATTERN")
		for _, n := range redact.BuiltinNames() {
			fmt.Fprintf(tw, "%s\t(built in)\n", n)
		}
		for _, r := range rules {
			fmt.Fprintf(tw, "%s\t%s\n", r.Name, r.Pattern)
		}
		return tw.Flush()
	}
	check := func(_ context.Context, args []string, io *stdio) error {
		fs := newFlagSet("redaction check", "--file rules.yaml", io)
		file := fs.String("file", "", "YAML list of {name, pattern}")
		if _, err := parse(fs, args); err != nil {
			return err
		}
		rules, err := readRules(*file, io)
		if err != nil {
			return err
		}
		fmt.Fprintf(io.stdout, "%s: %d rules accepted\n", *file, len(rules))
		return nil
	}
	return subcommand(ctx, "redaction", args, io, map[string]func(context.Context, []string, *stdio) error{
		"set": set, "show": show, "check": check,
	}, "set", "show", "check")
}

// exportsStore opens the trajectory store the operator's settings name.
func exportsStore(ctx context.Context, oc *opsConn, io *stdio) (trajstore.Store, error) {
	settings, err := exports.LoadSettings(func(k string) (string, bool) { v := io.getenv(k); return v, v != "" })
	if err != nil {
		return nil, usageErr("%v", err)
	}
	store, err := exporter.OpenStore(ctx, oc.js, oc.names, settings)
	if err != nil {
		return nil, usageErr("%v", err)
	}
	return store, nil
}

// cmdExports lists, gets, verifies or sweeps the exported trajectories.
func cmdExports(ctx context.Context, args []string, io *stdio) error {
	oneRun := func(name string, pos []string) (string, error) {
		if len(pos) != 1 {
			return "", usageErr("exports %s: want one run id, got %d arguments", name, len(pos))
		}
		if err := subject.ValidToken("run_id", pos[0]); err != nil {
			return "", usageErr("exports %s: %v", name, err)
		}
		return pos[0], nil
	}
	list := func(ctx context.Context, args []string, io *stdio) error {
		var all *bool
		var asJSON *bool
		f, _, err := opsFlags("exports list", "[--tenant T | --all] [--json]", args, io, func(fs *flag.FlagSet) {
			all = fs.Bool("all", false, "every tenant's exports")
			asJSON = fs.Bool("json", false, "print the records as JSON lines")
		})
		if err != nil {
			return err
		}
		tenant := f.tenant
		if *all {
			tenant = ""
		}
		var entries []exports.Entry
		if err := f.withOps(ctx, func(ctx context.Context, oc *opsConn) error {
			records, err := exports.Open(ctx, oc.js, oc.names)
			if err != nil {
				return usageErr("%v", err)
			}
			if entries, err = records.List(ctx, tenant); err != nil {
				return &exitError{code: exitFail, err: err}
			}
			return nil
		}); err != nil {
			return err
		}
		if *asJSON {
			enc := json.NewEncoder(io.stdout)
			for _, e := range entries {
				if err := enc.Encode(e.Record); err != nil {
					return err
				}
			}
			return nil
		}
		tw := tabwriter.NewWriter(io.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "TENANT\tRUN\tPRINCIPAL\tSIZE\tCREATED\tEXPIRES\tOBJECT")
		for _, e := range entries {
			r := e.Record
			created, expires := "-", "(being written)"
			if r.Stored {
				created = time.UnixMilli(r.Created).UTC().Format(time.RFC3339)
				expires = time.UnixMilli(r.Expires).UTC().Format(time.RFC3339)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", r.Tenant, r.RunID, r.Principal, r.Size, created, expires, r.Object)
		}
		return tw.Flush()
	}
	fetch := func(name string, args []string, io *stdio, out *string) (data []byte, e exports.Entry, err error) {
		f, pos, err := opsFlags("exports "+name, "--tenant T [flags] <run_id>", args, io, func(fs *flag.FlagSet) {
			if out != nil {
				fs.StringVar(out, "o", "", "write the trajectory to this file instead of stdout")
			}
		})
		if err != nil {
			return nil, e, err
		}
		runID, err := oneRun(name, pos)
		if err != nil {
			return nil, e, err
		}
		err = f.withOps(ctx, func(ctx context.Context, oc *opsConn) error {
			records, err := exports.Open(ctx, oc.js, oc.names)
			if err != nil {
				return usageErr("%v", err)
			}
			if e, err = records.Get(ctx, f.tenant, runID); err != nil {
				return &exitError{code: exitFail, err: err}
			}
			if !e.Record.Stored {
				return &exitError{code: exitFail, err: fmt.Errorf("the export of %s is still being written", runID)}
			}
			store, err := exportsStore(ctx, oc, io)
			if err != nil {
				return err
			}
			if data, err = store.Get(ctx, e.Record.Object); err != nil {
				return &exitError{code: exitFail, err: err}
			}
			return nil
		})
		return data, e, err
	}
	get := func(ctx context.Context, args []string, io *stdio) error {
		var out string
		data, _, err := fetch("get", args, io, &out)
		if err != nil {
			return err
		}
		if out != "" {
			return os.WriteFile(out, data, 0o600)
		}
		_, err = io.stdout.Write(data)
		return err
	}
	verify := func(ctx context.Context, args []string, io *stdio) error {
		data, e, err := fetch("verify", args, io, nil)
		if err != nil {
			return err
		}
		sum := trajstore.SHA256(data)
		if sum != e.Record.SHA256 || int64(len(data)) != e.Record.Size {
			return &exitError{code: exitFail, err: fmt.Errorf("%s: stored bytes do not match the record: sha256 %s (%d bytes), record says %s (%d bytes)",
				e.Record.Object, sum, len(data), e.Record.SHA256, e.Record.Size)}
		}
		fmt.Fprintf(io.stdout, "%s: ok, sha256 %s, %d bytes\n", e.Record.Object, sum, len(data))
		return nil
	}
	sweep := func(ctx context.Context, args []string, io *stdio) error {
		f, _, err := opsFlags("exports sweep", "[flags]", args, io, nil)
		if err != nil {
			return err
		}
		var msg *nats.Msg
		if err := f.withOps(ctx, func(ctx context.Context, oc *opsConn) error {
			if msg, err = oc.nc.RequestWithContext(ctx, oc.names.ExportsSweep(), nil); err != nil {
				return &exitError{code: exitFail, err: fmt.Errorf("sweep: %w (is a sweeper running?)", err)}
			}
			return nil
		}); err != nil {
			return err
		}
		if code := msg.Header.Get("Nats-Service-Error-Code"); code != "" {
			return &exitError{code: exitFail, err: fmt.Errorf("sweep: %s %s", code, msg.Header.Get("Nats-Service-Error"))}
		}
		var reply sweeper.SweepReply
		if err := json.Unmarshal(msg.Data, &reply); err != nil {
			return &exitError{code: exitFail, err: fmt.Errorf("sweep reply: %w", err)}
		}
		fmt.Fprintf(io.stdout, "swept %d, failed %d, pending %d, kept %d\n", reply.Swept, reply.Failed, reply.Pending, reply.Kept)
		if reply.Error != "" {
			return &exitError{code: exitFail, err: errors.New(reply.Error)}
		}
		return nil
	}
	return subcommand(ctx, "exports", args, io, map[string]func(context.Context, []string, *stdio) error{
		"list": list, "get": get, "verify": verify, "sweep": sweep,
	}, "list", "get", "verify", "sweep")
}
