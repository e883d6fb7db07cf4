package supervisor

import (
	"errors"
	"testing"
)

func TestLookupCredentials(t *testing.T) {
	c, err := LookupCredentials("root", "")
	if err != nil {
		t.Fatal(err)
	}
	if c.UID != 0 || c.GID != 0 {
		t.Errorf("root resolved to %+v", c)
	}
	c, err = LookupCredentials("", "root")
	if err != nil || c.GID != 0 {
		t.Fatalf("group root: %+v, %v", c, err)
	}
	for _, tt := range []struct{ user, group, kind string }{
		{"no-such-user-berth", "", "user"},
		{"", "no-such-group-berth", "group"},
	} {
		_, err := LookupCredentials(tt.user, tt.group)
		var ue *UnknownUserError
		if !errors.As(err, &ue) || ue.Kind != tt.kind {
			t.Errorf("LookupCredentials(%q, %q) = %v, want an unknown %s", tt.user, tt.group, err, tt.kind)
		}
	}
}
