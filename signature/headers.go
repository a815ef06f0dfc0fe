package signature

import "net/http"

// The header checks of CheckHeaders: each reads only what its Verify reads
// first, so a request they refuse is one Verify would refuse with the same
// error, before any MAC or signature is computed.

func (e *engine) checkHeaders(h http.Header) error {
	value, err := e.sigErrors.get(h, e.header)
	if err != nil {
		return err
	}
	var sigs sigSet
	sigs.size = e.size
	if _, err := e.parse(value, &sigs); err != nil {
		return err
	}
	if e.tsHeader != "" {
		if _, err := e.tsErrors.get(h, e.tsHeader); err != nil {
			return err
		}
	}
	if e.idHeader != "" {
		if _, err := e.idErrors.get(h, e.idHeader); err != nil {
			return err
		}
	}
	return nil
}

func (v *slackVerifier) checkHeaders(h http.Header) error {
	ts, err := slackTimestampErrors.get(h, headerSlackTimestamp)
	if err != nil {
		return err
	}
	if _, ok := parseUnix(ts); !ok {
		return slackTimestampErrors.malformed
	}
	value, err := slackSignatureErrors.get(h, headerSlackSignature)
	if err != nil {
		return err
	}
	var sigs sigSet
	return parseSlack(value, &sigs)
}

func (v *edVerifier) checkHeaders(h http.Header) error {
	s := v.scheme
	ts, err := s.tsErrors.get(h, s.tsHeader)
	if err != nil {
		return err
	}
	if _, ok := parseUnix(ts); !ok {
		return s.tsErrors.malformed
	}
	_, err = s.sigErrors.get(h, s.sigHeader)
	return err
}

func (v *tokenVerifier) checkHeaders(h http.Header) error {
	_, err := v.errors.get(h, v.header)
	return err
}
