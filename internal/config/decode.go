package config

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/goccy/go-yaml/ast"
)

// Decoding is strict and driven by the types: a struct field is read from the
// key its `yaml` tag names, any other key is an error, and a value of the
// wrong kind is an error at its position, never converted. Every problem is
// reported, not only the first, and what is learned about each field (where
// its key and value are, whether it could be read) is kept in a tree of
// spots, so that the checks run after decoding can point at the field.
//
// A tag may carry options after the key:
//
//	omitempty  an empty list or mapping leaves the field nil
//	alloc      a null value still sets the pointer (to a section with its defaults)
//	nonempty   the strings of a list must not be ""
//	nonblank   nor only blanks
//	roles=K    the file writes this map[string][]string as role: {allowed_tools: [...]},
//	           checked as an authz or a client role (K is authz or client)
//
// A type with defaults has a setDefaults method, called on each value the
// decoder allocates; a map value named by its key has a setKey method,
// called before it is decoded. A type with rules beyond the types of its
// fields has a check method, called once it is decoded, which reports at
// the fields' positions and returns false when the value must count as
// failed. Checks that need more than one section, or the environment, run
// after decoding (validateAuth, validateFallbacks, validateClients, ...).

// spot is what decoding learned about one field of the file. Spots form a
// tree that follows the file, so that keys containing dots never mix up.
type spot struct {
	key    Pos     // its key, or for a list item the item
	val    Pos     // its value, unless broken
	num    float64 // a duration as written, in seconds
	seq    int     // the order in which fields were met
	null   bool    // the value is null
	broken bool    // the value itself could not be read (wrong kind, bad alias, failed merge, a failed check)
	bad    bool    // broken, or something inside it is: checks of it are skipped
	keys   map[string]*spot
	items  []*spot
}

// kid returns the spot of key under s, or none.
func (s *spot) kid(key string) *spot {
	if c := s.keys[key]; c != nil {
		return c
	}
	return none
}

// walk calls fn with the dotted path of each spot under s ("auth.jwt",
// "args[0]"), in the order they were met.
func (s *spot) walk(path string, fn func(path string, s *spot)) {
	type pathSpot struct {
		path string
		s    *spot
	}
	var all []pathSpot
	var visit func(path string, s *spot)
	visit = func(path string, s *spot) {
		all = append(all, pathSpot{path, s})
		for k, c := range s.keys {
			visit(join(path, k), c)
		}
		for i, c := range s.items {
			visit(fmt.Sprintf("%s[%d]", path, i), c)
		}
	}
	visit(path, s)
	slices.SortFunc(all, func(a, b pathSpot) int { return a.s.seq - b.s.seq })
	for _, e := range all {
		fn(e.path, e.s)
	}
}

// positions returns the position of each key and item under s by dotted
// path; where two paths read the same, the later wins.
func (s *spot) positions() map[string]Pos {
	var m map[string]Pos
	s.walk("", func(path string, s *spot) {
		if s.key != (Pos{}) {
			if m == nil {
				m = map[string]Pos{}
			}
			m[path] = s.key
		}
	})
	return m
}

// at is where a value sits: its dotted path for messages, and its spot.
type at struct {
	field string
	s     *spot
}

// child returns where the value of key sits, creating its spot.
func (d *decoder) child(a at, key string, keyPos Pos) at {
	if a.s.keys == nil {
		a.s.keys = map[string]*spot{}
	}
	d.seq++
	c := &spot{key: keyPos, seq: d.seq}
	a.s.keys[key] = c
	return at{join(a.field, key), c}
}

// tagOpts are the options of a yaml tag.
type tagOpts struct {
	omitempty, alloc, nonempty, nonblank bool
	roles                                string
}

type structField struct {
	key   string
	index int
	opts  tagOpts
}

// structInfo lists the file keys of a struct type in field order, which is
// the order suggestions prefer.
type structInfo struct {
	fields []structField
	keys   []string
}

var structInfos sync.Map // reflect.Type -> *structInfo

func infoOf(t reflect.Type) *structInfo {
	if v, ok := structInfos.Load(t); ok {
		return v.(*structInfo)
	}
	info := &structInfo{}
	for i := range t.NumField() {
		tag, ok := t.Field(i).Tag.Lookup("yaml")
		if !ok {
			continue
		}
		key, rest, _ := strings.Cut(tag, ",")
		f := structField{key: key, index: i}
		for opt := range strings.SplitSeq(rest, ",") {
			switch opt {
			case "omitempty":
				f.opts.omitempty = true
			case "alloc":
				f.opts.alloc = true
			case "nonempty":
				f.opts.nonempty = true
			case "nonblank":
				f.opts.nonempty, f.opts.nonblank = true, true
			case "roles=authz", "roles=client":
				f.opts.roles = strings.TrimPrefix(opt, "roles=")
			case "":
			default:
				panic(fmt.Sprintf("config: unknown yaml tag option %q on %s.%s", opt, t, t.Field(i).Name))
			}
		}
		info.fields = append(info.fields, f)
		info.keys = append(info.keys, key)
	}
	structInfos.Store(t, info)
	return info
}

func (info *structInfo) field(key string) *structField {
	for i := range info.fields {
		if info.fields[i].key == key {
			return &info.fields[i]
		}
	}
	return nil
}

// unknownKeyer is implemented by the types whose unknown keys deserve a
// message of their own.
type unknownKeyer interface {
	unknownKey(key string, known []string) string
}

type defaulter interface{ setDefaults() }

type checked interface{ check(s scope) bool }

// keyed is implemented by the values of a map that are named by their key.
type keyed interface{ setKey(s scope, key string) }

// newValue allocates a T with its defaults.
func newValue(t reflect.Type) reflect.Value {
	p := reflect.New(t)
	if d, ok := p.Interface().(defaulter); ok {
		d.setDefaults()
	}
	return p
}

// scalar reads the scalar r (n resolved, not null) into v; false after
// reporting a problem. Seconds are greater than 0 and at most maxSeconds;
// any other duration is a number of seconds whose owner checks its range.
func (d *decoder) scalar(n, r ast.Node, v reflect.Value, a at) bool {
	switch v.Kind() {
	case reflect.String:
		s, ok := scalarText(r)
		if !ok {
			d.errorf(posOf(r), a.field, "must be a string, got %s", kindOf(r))
			return false
		}
		v.SetString(s)
		return true
	case reflect.Bool:
		b, ok := r.(*ast.BoolNode)
		if !ok {
			d.errorf(posOf(r), a.field, "must be true or false, got %s", kindOf(r))
			return false
		}
		v.SetBool(b.Value)
		return true
	}
	f, i, isInt, _, ok := d.number(r, a.field)
	switch {
	case !ok:
	case v.Type() == reflect.TypeFor[Seconds]():
		dur, msg := seconds(f)
		if msg != "" {
			d.errorf(posOf(n), a.field, "%s", msg)
			return false
		}
		v.SetInt(int64(dur))
	case v.Type() == reflect.TypeFor[time.Duration]():
		a.s.num = f
		v.SetInt(int64(max(-1e9, min(f, 1e9)) * float64(time.Second)))
	case v.Kind() == reflect.Float64:
		v.SetFloat(f)
	case !isInt || int64(int(i)) != i:
		d.errorf(posOf(n), a.field, "must be an integer")
		return false
	default:
		v.SetInt(i)
	}
	return ok
}

// decode reads the value n into v and reports whether it decoded cleanly,
// recording what it learned in a's spot.
func (d *decoder) decode(n ast.Node, v reflect.Value, a at, o tagOpts) bool {
	null, broken, ok := d.decodeNode(n, v, a, o)
	s := a.s
	if !broken {
		s.val, s.null = posOf(n), null
	}
	s.broken = s.broken || broken
	s.bad = s.bad || broken || !ok
	return !broken && ok
}

// decodeNode does the work of decode: null reports a null value, broken a
// value that could not be read at all, and ok false a problem inside it.
func (d *decoder) decodeNode(n ast.Node, v reflect.Value, a at, o tagOpts) (null, broken, ok bool) {
	field := a.field
	switch v.Kind() {
	case reflect.String, reflect.Bool, reflect.Int, reflect.Int64, reflect.Float64:
		r, ok := d.resolve(n, field)
		if !ok || isNull(r) {
			return ok, !ok, true
		}
		return false, !d.scalar(n, r, v, a), true
	case reflect.Pointer:
		r, ok := d.resolve(n, field)
		if !ok {
			if o.alloc {
				v.Set(newValue(v.Type().Elem()))
			}
			return false, true, true
		}
		if isNull(r) && !o.alloc {
			return true, false, true
		}
		p := newValue(v.Type().Elem())
		if p.Elem().Kind() == reflect.Struct {
			known, broken, ok := d.decodeStruct(n, p.Elem(), a)
			if known > 0 || !o.omitempty {
				v.Set(p)
			}
			return isNull(r), broken, ok
		}
		null, broken, ok := d.decodeNode(n, p.Elem(), a, o)
		if !null && !broken {
			v.Set(p)
		}
		return null, broken, ok
	case reflect.Struct:
		_, broken, ok := d.decodeStruct(n, v, a)
		return false, broken, ok
	case reflect.Slice:
		return d.decodeList(n, v, a, o)
	case reflect.Map:
		if o.roles != "" {
			return d.decodeRoles(n, v, a, o.roles)
		}
		if v.Type().Elem().Kind() == reflect.Interface {
			return d.decodeArgs(n, v, field)
		}
		return d.decodeMap(n, v, a, o)
	}
	panic(fmt.Sprintf("config: field %s has unsupported type %s", field, v.Type()))
}

// decodeStruct reads a mapping into the tagged fields of v. known counts the
// keys that name a field.
func (d *decoder) decodeStruct(n ast.Node, v reflect.Value, a at) (known int, broken, ok bool) {
	entries, complete := d.mapping(n, a.field)
	info := infoOf(v.Type())
	ok = true
	for _, e := range entries {
		f := info.field(e.key)
		if f == nil {
			msg := fmt.Sprintf("unknown field %q%s", e.key, suggest(e.key, info.keys))
			if u, isU := v.Addr().Interface().(unknownKeyer); isU {
				msg = u.unknownKey(e.key, info.keys)
			}
			d.errorf(e.pos, join(a.field, e.key), "%s", msg)
			ok = false
			continue
		}
		known++
		sub := d.child(a, e.key, e.pos)
		ok = d.decode(e.value, v.Field(f.index), sub, f.opts) && ok
	}
	if c, isC := v.Addr().Interface().(checked); isC {
		a.s.broken = !complete // visible to the check
		ok = c.check(scope{d, a}) && ok
	}
	return known, !complete, ok
}

// decodeList reads a list of strings or of structs. Strings may not be null,
// and the nonempty and nonblank options add their rules.
func (d *decoder) decodeList(n ast.Node, v reflect.Value, a at, o tagOpts) (null, broken, ok bool) {
	r, ok := d.resolve(n, a.field)
	if !ok {
		return false, true, true
	}
	if isNull(r) {
		return true, false, true
	}
	items, ok := d.sequence(r, a.field)
	if !ok {
		return false, true, true
	}
	if len(items) == 0 && o.omitempty {
		return false, false, true
	}
	list := reflect.MakeSlice(v.Type(), len(items), len(items))
	a.s.items = make([]*spot, len(items))
	ok = true
	for i, item := range items {
		d.seq++
		a.s.items[i] = &spot{key: mappingPos(item), seq: d.seq}
		sub := at{fmt.Sprintf("%s[%d]", a.field, i), a.s.items[i]}
		if list.Index(i).Kind() != reflect.String {
			ok = d.decode(item, list.Index(i), sub, tagOpts{}) && ok
			continue
		}
		s, set, itemOK := d.str(item, sub.field)
		msg := ""
		switch {
		case !itemOK:
		case !set:
			msg = "must be a string, got null"
		case o.nonempty && s == "":
			msg = "must not be empty"
		case o.nonblank && strings.TrimSpace(s) == "":
			msg = "must not be blank"
		}
		if msg != "" {
			d.errorf(posOf(item), sub.field, "%s", msg)
			itemOK = false
		}
		if itemOK {
			sub.s.val = posOf(item)
			list.Index(i).SetString(s)
		} else {
			sub.s.broken, sub.s.bad = true, true
			ok = false
		}
	}
	v.Set(list)
	return false, false, ok
}

// decodeMap reads a mapping into a map keyed by string. Pointer values are
// always allocated; a string value may not be null. An empty mapping leaves
// the map nil.
func (d *decoder) decodeMap(n ast.Node, v reflect.Value, a at, o tagOpts) (null, broken, ok bool) {
	entries, complete := d.mapping(n, a.field)
	if len(entries) == 0 {
		return false, !complete, true
	}
	m := reflect.MakeMapWithSize(v.Type(), len(entries))
	elem := v.Type().Elem()
	ok = true
	for _, e := range entries {
		sub := d.child(a, e.key, e.pos)
		ev := reflect.New(elem).Elem()
		switch elem.Kind() {
		case reflect.Pointer:
			p := newValue(elem.Elem())
			if k, isK := p.Interface().(keyed); isK {
				k.setKey(scope{d, sub}, e.key)
			}
			ok = d.decode(e.value, p.Elem(), sub, o) && ok
			ev.Set(p)
		case reflect.String:
			if r, rok := d.resolve(e.value, sub.field); rok && isNull(r) {
				d.errorf(e.pos, sub.field, "must be a string, got null (write \"\" for an empty value)")
				sub.s.broken, sub.s.bad = true, true
				ok = false
				continue
			}
			if !d.decode(e.value, ev, sub, o) {
				ok = false
				continue // left out, so that other checks do not see it
			}
		default:
			ok = d.decode(e.value, ev, sub, o) && ok
		}
		m.SetMapIndex(reflect.ValueOf(e.key), ev)
	}
	v.Set(m)
	return false, !complete, ok
}

// decodeArgs reads a mapping of any values (a health check's tool arguments).
func (d *decoder) decodeArgs(n ast.Node, v reflect.Value, field string) (null, broken, ok bool) {
	x, ok := d.value(n, field)
	switch m := x.(type) {
	case nil:
		return ok, !ok, true
	case map[string]any:
		v.Set(reflect.ValueOf(m))
		return false, !ok, true
	}
	if ok {
		d.errorf(posOf(n), field, "must be a mapping of argument names to values, got %s", kindOfValue(x))
	}
	return false, true, true
}

// decodeRoles reads role_restrictions: role -> {allowed_tools: [...]} into a
// map[string][]string, each role read as an authzRole or, when kind is
// "client", a clientRole.
func (d *decoder) decodeRoles(n ast.Node, v reflect.Value, a at, kind string) (null, broken, ok bool) {
	roles := reflect.New(reflect.TypeFor[map[string]*authzRole]()).Elem()
	if kind == "client" {
		roles = reflect.New(reflect.TypeFor[map[string]*clientRole]()).Elem()
	}
	null, broken, ok = d.decodeMap(n, roles, a, tagOpts{})
	if !roles.IsNil() {
		m := make(map[string][]string, roles.Len())
		for it := roles.MapRange(); it.Next(); {
			m[it.Key().String()] = it.Value().Interface().(interface{ tools() []string }).tools()
		}
		v.Set(reflect.ValueOf(m))
	}
	return null, broken, ok
}

// kindOfValue names the kind of a decoded value for type errors, never the
// value itself.
func kindOfValue(v any) string {
	switch v.(type) {
	case []any:
		return "a list"
	case string:
		return "a string"
	case int64:
		return "an integer"
	case float64:
		return "a number"
	case bool:
		return "a boolean"
	}
	return "an unsupported value"
}

// mappingPos returns the position of a block mapping's first key: the
// mapping node itself sits at that key's colon, which reads oddly in a
// message about the whole item.
func mappingPos(n ast.Node) Pos {
	if m, ok := n.(*ast.MappingNode); ok && len(m.Values) > 0 && m.Values[0] != nil && m.Values[0].Key != nil {
		if p := posOf(m.Values[0].Key); p.Line > 0 {
			return p
		}
	}
	return posOf(n)
}

// scope gives a check method the positions and the state of a field of
// the value it checks; in and item step to the fields inside it.
type scope struct {
	d *decoder
	a at
}

// none is the spot of a field the file does not have.
var none = &spot{}

func (s scope) in(key string) scope { return scope{s.d, at{join(s.a.field, key), s.a.s.kid(key)}} }

func (s scope) item(i int) scope {
	c := none
	if i < len(s.a.s.items) {
		c = s.a.s.items[i]
	}
	return scope{s.d, at{fmt.Sprintf("%s[%d]", s.a.field, i), c}}
}

// keysOf returns the keys of m, a map decoded at s, in the order the file
// has them, so that problems come out in a stable order.
func keysOf[V any](s scope, m map[string]V) []string {
	keys := slices.Collect(maps.Keys(m))
	slices.SortFunc(keys, func(a, b string) int { return s.in(a).a.s.seq - s.in(b).a.s.seq })
	return keys
}

// has reports whether the file has the field, whatever its value.
func (s scope) has() bool { return s.a.s != none }

// set reports whether the field has a value that decoded, other than null.
func (s scope) set() bool { return s.has() && !s.a.s.null && !s.a.s.broken }

func (s scope) broken() bool { return s.a.s.broken }

// fail marks the field as failed, so that later checks skip it.
func (s scope) fail() {
	if s.has() {
		s.a.s.broken, s.a.s.bad = true, true
	}
}

// errorf reports a problem of the field at p.
func (s scope) errorf(p Pos, format string, args ...any) { s.d.errorf(p, s.a.field, format, args...) }

// atKey reports a problem at the field's key, atVal at its value.
func (s scope) atKey(format string, args ...any) { s.errorf(s.a.s.key, format, args...) }
func (s scope) atVal(format string, args ...any) { s.errorf(s.a.s.val, format, args...) }

// between checks an integer the file sets; false when it is out of range.
func (s scope) between(v, lo, hi int) bool {
	if s.set() {
		if msg := between(v, lo, hi); msg != "" {
			s.atVal("%s", msg)
			return false
		}
	}
	return true
}

// secondsUpTo checks a duration the file sets, from 0 to hi seconds.
func (s scope) secondsUpTo(hi int) bool {
	if v := s.a.s.num; s.set() && !(v >= 0 && v <= float64(hi)) {
		s.atVal("must be a number of seconds from 0 to %d", hi)
		return false
	}
	return true
}

// oneOf checks a string the file sets against the values allowed.
func (s scope) oneOf(v string, allowed ...string) bool {
	if s.set() {
		if msg := oneOf(v, allowed...); msg != "" {
			s.atVal("%s", msg)
			return false
		}
	}
	return true
}
