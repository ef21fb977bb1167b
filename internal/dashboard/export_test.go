package dashboard

// CampaignMessage is campaignMessage, for the browser test (package
// dashboard_test, which runs the daemon).
var CampaignMessage = campaignMessage
