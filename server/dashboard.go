package server

func (s *Server) dashboardRoutes() {}
