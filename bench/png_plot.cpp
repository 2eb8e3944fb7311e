#include "bench/png_plot.h"

#include <cairo.h>
#include <librsvg/rsvg.h>

#include <cmath>
#include <memory>

namespace mlk::bench {

namespace {

struct GErrorFree {
  void operator()(GError* e) const { g_error_free(e); }
};
struct SurfaceFree {
  void operator()(cairo_surface_t* s) const { cairo_surface_destroy(s); }
};
struct CairoFree {
  void operator()(cairo_t* c) const { cairo_destroy(c); }
};

std::string gerror_text(GError* e) { return e && e->message ? e->message : "unknown error"; }

cairo_status_t append(void* closure, const unsigned char* data, unsigned int n) {
  static_cast<std::string*>(closure)->append(reinterpret_cast<const char*>(data), n);
  return CAIRO_STATUS_SUCCESS;
}

}  // namespace

Expected<std::string> svg_to_png(const std::string& svg) {
  GError* raw_error = nullptr;
  RsvgHandle* handle = rsvg_handle_new_from_data(reinterpret_cast<const guint8*>(svg.data()), svg.size(), &raw_error);
  std::unique_ptr<GError, GErrorFree> error(raw_error);
  if (!handle) return Status::InvalidArgument("librsvg cannot read the plot's SVG: " + gerror_text(error.get()));
  std::unique_ptr<RsvgHandle, decltype(&g_object_unref)> h(handle, &g_object_unref);
  gdouble w = 0, hgt = 0;
  if (!rsvg_handle_get_intrinsic_size_in_pixels(h.get(), &w, &hgt) || !(w >= 1 && hgt >= 1) || w > 1e5 || hgt > 1e5)
    return Status::InvalidArgument("the plot's SVG has no width and height in pixels");
  std::unique_ptr<cairo_surface_t, SurfaceFree> surface(
      cairo_image_surface_create(CAIRO_FORMAT_ARGB32, static_cast<int>(std::ceil(w)), static_cast<int>(std::ceil(hgt))));
  if (cairo_surface_status(surface.get()) != CAIRO_STATUS_SUCCESS)
    return Status::Internal(std::string("cairo: ") + cairo_status_to_string(cairo_surface_status(surface.get())));
  std::unique_ptr<cairo_t, CairoFree> cr(cairo_create(surface.get()));
  RsvgRectangle viewport{0, 0, w, hgt};
  raw_error = nullptr;
  if (!rsvg_handle_render_document(h.get(), cr.get(), &viewport, &raw_error)) {
    error.reset(raw_error);
    return Status::InvalidArgument("librsvg cannot draw the plot: " + gerror_text(error.get()));
  }
  cairo_surface_flush(surface.get());
  std::string png;
  cairo_status_t st = cairo_surface_write_to_png_stream(surface.get(), &append, &png);
  if (st != CAIRO_STATUS_SUCCESS) return Status::Internal(std::string("cairo cannot encode the PNG: ") + cairo_status_to_string(st));
  return png;
}

}  // namespace mlk::bench
