package service

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// An embodiment's state in the embodiment metrics.
const (
	embodimentServed   = "served"
	embodimentStarting = "starting"
	embodimentRefused  = "refused"
)

// registerEmbodimentState adds gateway.embodiment.state{embodiment,state}
// (Prometheus: gateway_embodiment_state): 1 for each embodiment the
// catalog names, in the state it is in — "served" (warmed up, taking
// traffic; also while a newer revision was refused), "starting" (binding
// or warming up: its requests answer 503 starting) or "refused" (not
// served; /info says why). gateway.embodiments counts the same by state;
// this names them, so an alert can say which embodiment is not warm.
func registerEmbodimentState(m metric.Meter, s *Core) error {
	g, err := m.Int64ObservableGauge("gateway.embodiment.state",
		metric.WithDescription("1 per embodiment in its warm-up state: served, starting, refused"))
	if err != nil {
		return err
	}
	_, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		set := s.set.Load()
		if set == nil {
			return nil
		}
		obs := func(tag, state string) {
			o.ObserveInt64(g, 1, metric.WithAttributes(attribute.String("embodiment", tag), attribute.String("state", state)))
		}
		for tag := range set.entries {
			obs(tag, embodimentServed)
		}
		for tag := range set.starting {
			if _, ok := set.entries[tag]; !ok {
				obs(tag, embodimentStarting)
			}
		}
		for tag := range set.refused {
			if _, ok := set.entries[tag]; !ok && !set.starting[tag] {
				obs(tag, embodimentRefused)
			}
		}
		return nil
	}, g)
	return err
}
