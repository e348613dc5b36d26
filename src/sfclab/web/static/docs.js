/* The API's page: Swagger UI over /openapi.json.  A file of its own, not an inline script, so
 * the server's Content-Security-Policy can allow scripts from this server only. */
window.ui = SwaggerUIBundle({
  url: "/openapi.json",
  dom_id: "#swagger-ui",
  layout: "BaseLayout",
  deepLinking: true,
  presets: [SwaggerUIBundle.presets.apis, SwaggerUIBundle.SwaggerUIStandalonePreset],
});
