package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"time"

	"github.com/agentmesh/agentmesh/pkg/gateway"
)

// cmdKeys creates, lists or revokes the HTTP gateway's API keys.
func cmdKeys(ctx context.Context, args []string, io *stdio) error {
	withKeys := func(f *clientFlags, do func(ctx context.Context, keys *gateway.Keys) error) error {
		return f.withOps(ctx, func(ctx context.Context, oc *opsConn) error {
			keys, err := gateway.OpenKeys(ctx, oc.js, oc.names)
			if err != nil {
				return usageErr("%v", err)
			}
			return do(ctx, keys)
		})
	}
	create := func(ctx context.Context, args []string, io *stdio) error {
		f, pos, err := opsFlags("keys create", "--tenant T --principal P", args, io, nil)
		if err != nil {
			return err
		}
		if len(pos) > 0 {
			return usageErr("keys create: unexpected argument %q", pos[0])
		}
		return withKeys(f, func(ctx context.Context, keys *gateway.Keys) error {
			key, rec, err := keys.Create(ctx, f.tenant, f.principal)
			if err != nil {
				return &exitError{code: exitFail, err: err}
			}
			// The key is printed here once: the mesh keeps only its hash.
			fmt.Fprintln(io.stdout, key)
			fmt.Fprintf(io.stderr, "key %s for %s/%s: keep it now, it is not shown again\n", rec.ID, rec.Tenant, rec.Principal)
			return nil
		})
	}
	list := func(ctx context.Context, args []string, io *stdio) error {
		var all, asJSON *bool
		f, pos, err := opsFlags("keys list", "[--tenant T | --all] [--json]", args, io, func(fs *flag.FlagSet) {
			all = fs.Bool("all", false, "list every tenant's keys")
			asJSON = fs.Bool("json", false, "print the keys as JSON, one a line")
		})
		if err != nil {
			return err
		}
		if len(pos) > 0 {
			return usageErr("keys list: unexpected argument %q", pos[0])
		}
		tenant := f.tenant
		if *all {
			tenant = ""
		}
		return withKeys(f, func(ctx context.Context, keys *gateway.Keys) error {
			recs, err := keys.List(ctx, tenant)
			if err != nil {
				return &exitError{code: exitFail, err: err}
			}
			enc := json.NewEncoder(io.stdout)
			for _, k := range recs {
				if *asJSON {
					if err := enc.Encode(k); err != nil {
						return err
					}
					continue
				}
				fmt.Fprintf(io.stdout, "%s  %s/%s  created %s\n", k.ID, k.Tenant, k.Principal, time.UnixMilli(k.Created).UTC().Format(time.RFC3339))
			}
			return nil
		})
	}
	revoke := func(ctx context.Context, args []string, io *stdio) error {
		f, pos, err := opsFlags("keys revoke", "<id>", args, io, nil)
		if err != nil {
			return err
		}
		if len(pos) != 1 {
			return usageErr("keys revoke: want one key id (agentmesh keys list shows them)")
		}
		return withKeys(f, func(ctx context.Context, keys *gateway.Keys) error {
			rec, err := keys.Revoke(ctx, pos[0])
			if err != nil {
				return &exitError{code: exitFail, err: err}
			}
			fmt.Fprintf(io.stdout, "revoked %s (%s/%s)\n", rec.ID, rec.Tenant, rec.Principal)
			return nil
		})
	}
	return subcommand(ctx, "keys", args, io, map[string]func(context.Context, []string, *stdio) error{
		"create": create, "list": list, "revoke": revoke,
	}, "create", "list", "revoke")
}
