package envconf

import (
	"errors"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"
)

type upper string

func (u *upper) UnmarshalText(b []byte) error {
	if strings.ToUpper(string(b)) != string(b) {
		return errors.New("want upper case")
	}
	*u = upper(b)
	return nil
}

type inner struct {
	Wait  time.Duration `env:"T_WAIT" default:"2ms" min:"0s" max:"1s" doc:"how long"`
	Level upper         `env:"T_LEVEL" default:"INFO" doc:"a level"`
}

type checked struct {
	A, B string `env:"T_AB"`
}

func (c checked) Validate() error {
	if c.A == "bad" {
		return errors.New("T_AB: bad")
	}
	return nil
}

type decl struct {
	Name     string   `env:"T_NAME" default:"lethe" doc:"a name"`
	On       bool     `env:"T_ON" default:"true" doc:"on"`
	N        int      `env:"T_N" default:"64" min:"1" max:"1024" doc:"a count"`
	Rate     float64  `env:"T_RATE" min:"0" doc:"a rate"`
	List     []string `env:"T_LIST" default:"a, b" doc:"a list"`
	Password string   `env:"T_PASSWORD" secret:"true" doc:"a secret"`
	Inner    inner
	Checked  checked
	Plain    string // not declared
}

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestLoadDefaultsAndValues(t *testing.T) {
	var d decl
	if err := Defaults(&d); err != nil {
		t.Fatal(err)
	}
	if d.Name != "lethe" || !d.On || d.N != 64 || d.Rate != 0 || strings.Join(d.List, "|") != "a|b" || d.Inner.Wait != 2*time.Millisecond || d.Inner.Level != "INFO" {
		t.Errorf("defaults: %+v", d)
	}
	err := Load(&d, env(map[string]string{"T_NAME": "x", "T_ON": "false", "T_N": "1024", "T_RATE": "1.5", "T_LIST": ",c,,d ,",
		"T_PASSWORD": "hunter2", "T_WAIT": "1s", "T_LEVEL": "DEBUG"}))
	if err != nil {
		t.Fatal(err)
	}
	if d.Name != "x" || d.On || d.N != 1024 || d.Rate != 1.5 || strings.Join(d.List, "|") != "c|d" || d.Password != "hunter2" || d.Inner.Wait != time.Second || d.Inner.Level != "DEBUG" {
		t.Errorf("values: %+v", d)
	}
}

// Every bad variable is reported, each named; a secret's value is never quoted.
func TestLoadErrors(t *testing.T) {
	var d decl
	err := Load(&d, env(map[string]string{"T_ON": "maybe", "T_N": "0", "T_WAIT": "2s", "T_LEVEL": "debug", "T_RATE": "-1"}))
	for _, want := range []string{`T_ON "maybe": want true or false`, `T_N "0": want a whole number from 1 to 1024`,
		`T_WAIT "2s": want a duration from 0s to 1s`, `T_LEVEL "debug": want upper case`, `T_RATE "-1": want a number of at least 0`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v lacks %q", err, want)
		}
	}
	type secretInt struct {
		PIN int `env:"T_PIN" secret:"true"`
	}
	var s secretInt
	if err := Load(&s, env(map[string]string{"T_PIN": "12x4"})); err == nil || strings.Contains(err.Error(), "12x4") || !strings.Contains(err.Error(), "T_PIN") {
		t.Errorf("secret error %v", err)
	}
	if err := Load(&d, env(map[string]string{"T_AB": "bad"})); err == nil || err.Error() != "T_AB: bad" {
		t.Errorf("validation: %v", err)
	}
	if err := Load(d, env(nil)); err == nil {
		t.Error("Load of a non-pointer succeeded")
	}
}

func TestVarsAndPrint(t *testing.T) {
	var d decl
	if err := Load(&d, env(map[string]string{"T_PASSWORD": "hunter2"})); err != nil {
		t.Fatal(err)
	}
	vs := Vars(&d)
	names := make([]string, len(vs))
	for i, v := range vs {
		names[i] = v.Name
	}
	if got := strings.Join(names, " "); got != "T_NAME T_ON T_N T_RATE T_LIST T_PASSWORD T_WAIT T_LEVEL T_AB T_AB" {
		t.Errorf("vars %s", got)
	}
	if vs[2].Type != "integer from 1 to 1024" || vs[6].Type != "duration from 0s to 1s" || vs[7].Type != "text" || vs[6].Field != "Inner.Wait" || vs[6].Doc != "how long" ||
		vs[6].Owner != "envconf.inner" || vs[0].Owner != "envconf.decl" {
		t.Errorf("vars %+v", vs)
	}
	var b strings.Builder
	if err := Print(&b, d); err != nil {
		t.Fatal(err)
	}
	want := "T_NAME=lethe\nT_ON=true\nT_N=64\nT_RATE=0\nT_LIST=a,b\nT_PASSWORD=****\nT_WAIT=2ms\nT_LEVEL=INFO\nT_AB=\n"
	if b.String() != want {
		t.Errorf("print:\n%s\nwant\n%s", b.String(), want)
	}
	if err := Conflicts(d); err != nil {
		t.Errorf("conflicts: %v", err)
	}
	type twice struct {
		A string `env:"T_X" default:"1"`
		B string `env:"T_X" default:"2"`
	}
	if err := Conflicts(twice{}); err == nil || !strings.Contains(err.Error(), "T_X") {
		t.Errorf("conflicting declarations: %v", err)
	}
}

func TestFormatDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{0: "0s", time.Minute: "1m", time.Hour: "1h", 90 * time.Minute: "1h30m",
		168 * time.Hour: "168h", 2 * time.Millisecond: "2ms", 90 * time.Second: "1m30s"} {
		if got := FormatDuration(d); got != want {
			t.Errorf("FormatDuration(%v) = %s, want %s", d, got, want)
		}
	}
}

// TestListenErrorNamesTheVariable: a taken address names the variable that moves it;
// other errors pass unchanged.
func TestListenErrorNamesTheVariable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, err = net.Listen("tcp", l.Addr().String())
	got := ListenError(err, "LETHE_HTTP_ADDR")
	if !errors.Is(got, syscall.EADDRINUSE) || !strings.Contains(got.Error(), "set LETHE_HTTP_ADDR to a free host:port") {
		t.Errorf("ListenError = %v", got)
	}
	other := errors.New("permission denied")
	if ListenError(other, "LETHE_HTTP_ADDR") != other || ListenError(nil, "X") != nil {
		t.Error("ListenError changed an error that is not EADDRINUSE")
	}
}
