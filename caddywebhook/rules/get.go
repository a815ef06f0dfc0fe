package rules

import (
	"strconv"
	"strings"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/common/types/traits"
)

// getFunction declares get(value, "a.b.c", default): the value at a dotted
// path, or default when any step of the path is missing, null or of the
// wrong kind. A numeric step indexes a list ("items.0.id"). It is the
// forgiving counterpart of `body.a.b.c`, which is an evaluation error when
// a field is missing.
func getFunction() cel.EnvOption {
	return cel.Function("get",
		cel.Overload("get_dyn_string_dyn",
			[]*cel.Type{cel.DynType, cel.StringType, cel.DynType}, cel.DynType,
			cel.FunctionBinding(func(args ...ref.Val) ref.Val {
				path, ok := args[1].(types.String)
				if !ok {
					return types.NewErr("get: the path must be a string")
				}
				return getPath(args[0], string(path), args[2])
			}),
		),
	)
}

func getPath(v ref.Val, path string, def ref.Val) ref.Val {
	if path == "" {
		return v
	}
	for step := range strings.SplitSeq(path, ".") {
		switch c := v.(type) {
		case traits.Mapper:
			next, found := c.Find(types.String(step))
			if !found || types.IsError(next) {
				return def
			}
			v = next
		case traits.Lister:
			i, err := strconv.Atoi(step)
			if err != nil || i < 0 {
				return def
			}
			if types.Int(i) >= c.Size().(types.Int) {
				return def
			}
			v = c.Get(types.Int(i))
		default:
			return def
		}
		if v == types.NullValue {
			return def
		}
	}
	return v
}
