"""One real desktop: Xvfb, a bubblewrap sandbox holding D-Bus, AT-SPI, openbox and the apps (LibreOffice
over UNO, Chromium over DevTools, VLC over HTTP), its accessibility tree, the GUI actions, and the jail
evaluators run the agent's code in. Nothing here knows about gRPC, fleets or task files."""
