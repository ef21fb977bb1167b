package pipeline

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nddmilter/nddmilter/internal/mime"
)

// Signs are what a check reads of a message besides its evidence: the
// graymail signs of its header (its mailing list, recipients, reply and
// Precedence fields, passing authentication results) and whether its
// body key is a signed note's (Message.SignedNote). They are not part
// of the evidence format, which a fleet's nodes exchange: a replicated
// report needs none. The delivery ledger keeps them beside a message's
// evidence, so that a purge decides on the message as its check would
// (internal/zap).
type Signs struct {
	ListID     string     `json:"list_id,omitempty"`
	ListPost   string     `json:"list_post,omitempty"`
	Recipients []string   `json:"recipients,omitempty"`
	Reply      bool       `json:"reply,omitempty"`
	Precedence string     `json:"precedence,omitempty"`
	AuthPasses []AuthPass `json:"auth_passes,omitempty"`
	SignedNote bool       `json:"signed_note,omitempty"`
}

// maxSigns bounds encoded Signs: at most mime.MaxRecipients addresses and
// maxAuthPasses results of bounded length, and a few short fields.
const maxSigns = 16 << 10

// ErrSigns is wrapped by UnmarshalSigns' errors.
var ErrSigns = errors.New("pipeline: undecodable signs")

// Signs returns m's signs.
func (m *Message) Signs() Signs {
	return Signs{ListID: m.ListID, ListPost: m.ListPost, Recipients: m.Recipients, Reply: m.Reply,
		Precedence: m.Precedence, AuthPasses: m.AuthPasses, SignedNote: m.SignedNote}
}

// SetSigns sets m's signs (a message made from evidence has none).
func (m *Message) SetSigns(s Signs) {
	m.ListID, m.ListPost, m.Recipients, m.Reply = s.ListID, s.ListPost, s.Recipients, s.Reply
	m.Precedence, m.AuthPasses, m.SignedNote = s.Precedence, s.AuthPasses, s.SignedNote
}

// MarshalSigns encodes s (JSON; nil when s is empty).
func MarshalSigns(s Signs) ([]byte, error) {
	if s.ListID == "" && s.ListPost == "" && len(s.Recipients) == 0 && !s.Reply && s.Precedence == "" && len(s.AuthPasses) == 0 && !s.SignedNote {
		return nil, nil
	}
	b, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("pipeline: encode signs: %w", err)
	}
	if len(b) > maxSigns {
		return nil, fmt.Errorf("pipeline: signs of %d bytes, more than %d", len(b), maxSigns)
	}
	return b, nil
}

// UnmarshalSigns decodes signs MarshalSigns encoded; empty b gives none.
func UnmarshalSigns(b []byte) (Signs, error) {
	var s Signs
	if len(b) == 0 {
		return s, nil
	}
	if len(b) > maxSigns {
		return Signs{}, fmt.Errorf("%w: %d bytes, more than %d", ErrSigns, len(b), maxSigns)
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return Signs{}, fmt.Errorf("%w: %v", ErrSigns, err)
	}
	if len(s.Recipients) > mime.MaxRecipients || len(s.AuthPasses) > maxAuthPasses {
		return Signs{}, fmt.Errorf("%w: %d recipients, %d results", ErrSigns, len(s.Recipients), len(s.AuthPasses))
	}
	return s, nil
}
