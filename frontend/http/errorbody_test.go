package httpfront

import "github.com/gr00tgw/gr00tgw/service"

// errorBody is the error shape the tests decode responses into.
type errorBody = service.ErrorBody
