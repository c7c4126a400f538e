// Package argv builds a command's argument vector declaratively from a
// typed request: each field tagged `cli:"--flag"` becomes its own argv
// elements, so no value is ever joined into a shell string.
//
// Tag forms, on string, bool, integer and []string fields:
//
//	`cli:"--model"`         string/int: "--model", value (omitted when zero)
//	`cli:"--verbose"`       bool: "--verbose" when true
//	`cli:"--add-dir"`       []string: "--add-dir", v for each element
//	`cli:"--tools,join=,"`  []string: "--tools", "a,b" (omitted when empty)
//	`cli:"--x,always"`      emit even when the value is zero
//	`cli:"-"` or no tag     not a flag
//
// Fields are emitted in declaration order; positional arguments are the
// adapter's to append.
package argv

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
)

// Build returns the flags of req, a struct or pointer to one. It panics on
// a tag on an unsupported field type: that is a programmer error caught by
// every adapter's tests.
func Build(req any) []string {
	v := reflect.Indirect(reflect.ValueOf(req))
	t := v.Type()
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		tag, ok := f.Tag.Lookup("cli")
		if !ok || tag == "-" || !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		always, join := false, ""
		for opts != "" {
			var opt string
			if strings.HasPrefix(opts, "join=") {
				opt, opts = opts, ""
				join = strings.TrimPrefix(opt, "join=")
				break
			}
			opt, opts, _ = strings.Cut(opts, ",")
			if opt == "always" {
				always = true
			}
		}
		fv := v.Field(i)
		switch fv.Kind() {
		case reflect.String:
			if s := fv.String(); s != "" || always {
				out = append(out, name, s)
			}
		case reflect.Bool:
			if fv.Bool() {
				out = append(out, name)
			}
		case reflect.Int, reflect.Int64, reflect.Int32:
			if n := fv.Int(); n != 0 || always {
				out = append(out, name, strconv.FormatInt(n, 10))
			}
		case reflect.Slice:
			if fv.Type().Elem().Kind() != reflect.String {
				panic(fmt.Sprintf("argv: field %s: cli tag on %s", f.Name, fv.Type()))
			}
			items := fv.Interface().([]string)
			if join != "" {
				if len(items) > 0 {
					out = append(out, name, strings.Join(items, join))
				}
				continue
			}
			for _, s := range items {
				out = append(out, name, s)
			}
		default:
			panic(fmt.Sprintf("argv: field %s: cli tag on %s", f.Name, fv.Type()))
		}
	}
	return out
}
