package luaapi

import "testing"

func TestSyntaxHint(t *testing.T) {
	tests := []struct {
		name, src, want string
	}{
		{"comma at a line's end",
			"job \"a\" {\n  cmd = { \"./train\" }\n  cpus = 4,\n}\n",
			`test.lua:3: syntax error near "cpus" (is a "," missing at the end of line 2?)`},
		{"comma after a number, a blank line and a comment between",
			"job \"a\" {\n  cmd = \"x\",\n  cpus = 4 -- four\n\n  -- more\n  gpus = 1,\n}\n",
			`test.lua:6: syntax error near "gpus" (is a "," missing at the end of line 3?)`},
		{"comma after a string with a dash in it",
			"job \"a\" {\n  cmd = \"a--b\"\n  cpus = 4,\n}\n",
			`test.lua:3: syntax error near "cpus" (is a "," missing at the end of line 2?)`},
		{"comma after a variable",
			"local n = 2\njob \"a\" {\n  cmd = \"x\",\n  cpus = n\n  gpus = 1,\n}\n",
			`test.lua:5: syntax error near "gpus" (is a "," missing at the end of line 4?)`},
		{"comma on the same line",
			"job \"a\" { cmd = { \"x\" } cpus = 1 }\n",
			`test.lua:1: syntax error near "cpus" (is a "," missing before it?)`},
		{"comma after a number on the same line",
			"job \"a\" { cmd = \"x\", cpus = 1.5 gpus = 1 }\n",
			`test.lua:1: syntax error near "gpus" (is a "," missing before it?)`},
		{"a declaration not closed",
			"job \"a\" {\n  cmd = \"x\",\n  cpus = 1\n\njob \"b\" {\n  cmd = \"y\",\n}\n",
			`test.lua:5: syntax error near "job" (is the "}" that closes the declaration above it missing?)`},
		{"a flavor not closed",
			"flavor \"small\" {\n  cpus = 1\nflavor('big') { cpus = 8 }\n",
			`test.lua:3: syntax error near "flavor" (is the "}" that closes the declaration above it missing?)`},

		{"a field written name: value",
			"job \"a\" { cmd: \"echo\" }\n",
			`test.lua:1: syntax error near "echo" (fields are written name = value, not name: value)`},
		{"a field written name: value, a number, on its own line",
			"job \"a\" {\n  cmd = \"x\",\n  cpus: 4,\n}\n",
			`test.lua:3: syntax error near "4" (fields are written name = value, not name: value)`},

		// No hint where the shape is not one of the slips.
		{"a name after a name on its line",
			"x = 1\nfoo bar\n",
			`test.lua:2: syntax error: parse error near "bar"`},
		{"after an operator",
			"job \"a\" {\n  cmd = \"x\" ..\n  = 1,\n}\n",
			`test.lua:3: syntax error near "="`},
		{"after a keyword that wants more",
			"job \"a\" {\n  cmd = \"x\",\n  cpus = 1 and\n  gpus = 1,\n}\n",
			`test.lua:4: syntax error near "="`},
		{"after a long string",
			"job \"a\" {\n  cmd = [[\n x ]]\n  cpus = 1,\n}\n",
			`test.lua:4: syntax error near "cpus"`},
		{"a keyword",
			"job \"a\" {\n  cmd = \"x\"\n  end\n}\n",
			`test.lua:3: syntax error near "end"`},
		{"a byte order mark before it",
			"\xef\xbb\xbfjob \"a\" { cmd = { \"x\" } cpus = 1 }\n",
			`test.lua:1: syntax error near "cpus" (is a "," missing before it?)`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := evalString(t, tc.src)
			if len(f.Errors) != 1 || f.Errors[0].Problem != Syntax {
				t.Fatalf("errors: %v", f.Errors)
			}
			if got := f.Errors[0].Error(); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

func FuzzSyntaxHint(f *testing.F) {
	f.Add([]byte("job \"a\" {\n cmd = \"x\"\n cpus = 1\n}\n"), 3, 6, "cpus")
	f.Add([]byte("a\n\xff--\"\n b"), 3, 2, "b")
	f.Fuzz(func(t *testing.T, src []byte, line, col int, token string) {
		_ = syntaxHint(src, line, col, token) // must not panic
	})
}
