package telemetry

import "testing"

func TestBus(t *testing.T) {
	b := NewBus()
	s := b.Subscribe(2)
	b.Publish("a", 1)
	b.Publish("b", 2)
	b.Publish("c", 3) // buffer full: dropped, not blocking
	if ev := <-s.C; ev.Type != "a" || ev.Seq != 1 {
		t.Errorf("first event = %+v", ev)
	}
	if ev := <-s.C; ev.Type != "b" || ev.Seq != 2 {
		t.Errorf("second event = %+v", ev)
	}
	if n := s.Dropped(); n != 1 {
		t.Errorf("dropped = %d, want 1", n)
	}
	s.Close()
	s.Close()
	if _, ok := <-s.C; ok {
		t.Error("C not closed")
	}
	b.Publish("d", nil) // no subscribers left: fine
}
